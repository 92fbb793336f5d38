"""Generated protobuf and gRPC stubs of wire/protos (python -m wire.generate).

Do not edit: change the .proto and regenerate. Only the wire package imports these.
"""
