"""tests of qrmd.balancer."""
