"""The wire: every protocol qrmd speaks, and the only place protobuf and gRPC live.

qrmd talks gRPC over unix sockets to the kubelet fork's QoS resource manager,
katalyst-agent's eviction manager and sys-advisor (spec wire.md). This package holds:

- `protos/`: the `.proto` files, written for qrmd from wire.md §3–§7. Package,
  service and method names, field numbers and types are the upstream ones, so the
  method paths of wire.md §1.3 and every byte match the Go peers; the gogoproto
  options are left out, since they change only Go code.
  `pluginregistration` (plugin-watcher registration), `resourceplugin.v1alpha1` (QRM
  ResourcePlugin and legacy Registration), `advisorsvc` and `cpuadvisor` (sys-advisor),
  `evictionplugin.v1alpha1` with a wire-compatible subset of the Kubernetes Pod
  (`k8s_core_v1`, `k8s_meta_v1`, `k8s_resource`).
- `gen/`: the stubs grpcio-tools generates from them (`python -m wire.generate`),
  committed; a test fails when they are stale. Never edit them by hand.
- the gRPC servers and clients: the plugin-watcher registration, the ResourcePlugin
  and EvictionPlugin servers (the sys-advisor client comes with the advisor link, a later
  issue; its protos are here already).
  One mechanism serves every plugin socket: `sockets` (the file: 107-byte path check,
  stale file removal, owner-only bind on `unix:<path>`, inode-checked removal, socket
  directories de-duplicated by inode), `registration_service` (`GetInfo` and
  `NotifyRegistrationStatus`) and `plugin_socket` (one server on one socket through
  `machines.registration`: self-dial after serving, re-creation on
  `plugin_registered=false` with retries, stop). On it sit thin layers:
  `plugin_server` (the CPU plugin's socket per plugin-watcher directory, serving
  ResourcePlugin) and `eviction_server` (the memory balancer's EvictionPlugin);
  `resource_plugin` (the eight RPCs as one table: convert, ask the Allocator within the
  deadline, convert back) and `rpc` (what every handler does around that: tolerant
  parsing, error mapping, the `RpcObserver` metrics hook); and the kubelet's side of the
  same protocol, `kubelet_client` (one plugin socket, every call with the kubelet's
  deadline, for the kubelet simulator and tests), and katalyst-agent's side of the
  eviction plugin, `eviction_client` (for the demo and tests);
- the conversion between protobuf messages and the domain types of `policy/` and
  `actors/`, in both directions, where the wire rules are enforced (`convert`; wire.md
  §1.1: "no NUMA preference" leaves the `resource_hints` key out, never an empty list),
  and its mirror for the kubelet's side (`kubelet_convert`: requests out, answers in, the
  absent key read back as no preference);
- `errors`: the one gRPC status each kind of error answers (`policy.errors.ErrorKind`).

The rule: protobuf types never leave this package. Servers convert a request into
domain values before anything else sees it and convert the answer back last; nothing
outside `wire` imports `wire.gen` or `google.protobuf` (import-linter enforces it: the
layers keep the lower packages out of `wire`, and two contracts keep `google` and `wire.gen`
out of `qrmd`). Protobuf parses and serializes the bytes; meaning is decided elsewhere.
"""
