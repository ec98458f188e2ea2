"""avalanchego's protocol facts, kept here as data, against the compiled descriptors of the
project's own .proto files: every message's fields (name, number, type, label), every enum's
values and every method of vm.VM (RPC chain VM protocols 45 and 46, one vm.proto),
vm.runtime.Runtime, appsender.AppSender (what a plugin calls on the node) and the
Prometheus client_model messages Gather answers with. A change
to a .proto file that moves one of them away from avalanchego's wire fails here."""

from __future__ import annotations

from google.protobuf import descriptor
from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor

from vmstack.wrappers.rpc import PROTOCOL_VERSION, appsender_pb2, metrics_pb2, runtime_pb2, vm_pb2

#: One line per message, enum or method; a message's fields indented below it, each as
#: ``name number type [repeated|optional]`` (optional: a field with explicit presence).
FACTS = """
vm.InitializeRequest
    network_id 1 uint32
    subnet_id 2 bytes
    chain_id 3 bytes
    node_id 4 bytes
    public_key 5 bytes
    x_chain_id 6 bytes
    c_chain_id 7 bytes
    avax_asset_id 8 bytes
    chain_data_dir 9 string
    genesis_bytes 10 bytes
    upgrade_bytes 11 bytes
    config_bytes 12 bytes
    db_server_addr 13 string
    server_addr 14 string
    network_upgrades 15 vm.NetworkUpgrades
vm.NetworkUpgrades
    apricot_phase_1_time 1 google.protobuf.Timestamp
    apricot_phase_2_time 2 google.protobuf.Timestamp
    apricot_phase_3_time 3 google.protobuf.Timestamp
    apricot_phase_4_time 4 google.protobuf.Timestamp
    apricot_phase_4_min_p_chain_height 5 uint64
    apricot_phase_5_time 6 google.protobuf.Timestamp
    apricot_phase_pre_6_time 7 google.protobuf.Timestamp
    apricot_phase_6_time 8 google.protobuf.Timestamp
    apricot_phase_post_6_time 9 google.protobuf.Timestamp
    banff_time 10 google.protobuf.Timestamp
    cortina_time 11 google.protobuf.Timestamp
    cortina_x_chain_stop_vertex_id 12 bytes
    durango_time 13 google.protobuf.Timestamp
    etna_time 14 google.protobuf.Timestamp
    fortuna_time 15 google.protobuf.Timestamp
    granite_time 16 google.protobuf.Timestamp
    granite_epoch_duration 17 google.protobuf.Duration
    helicon_time 18 google.protobuf.Timestamp
vm.InitializeResponse
    last_accepted_id 1 bytes
    last_accepted_parent_id 2 bytes
    height 3 uint64
    bytes 4 bytes
    timestamp 5 google.protobuf.Timestamp
vm.SetStateRequest
    state 1 vm.State
vm.SetStateResponse
    last_accepted_id 1 bytes
    last_accepted_parent_id 2 bytes
    height 3 uint64
    bytes 4 bytes
    timestamp 5 google.protobuf.Timestamp
vm.CreateHandlersResponse
    handlers 1 vm.Handler repeated
vm.Handler
    prefix 1 string
    server_addr 2 string
vm.NewHTTPHandlerResponse
    server_addr 1 string
vm.WaitForEventResponse
    message 1 vm.Message
vm.BuildBlockRequest
    p_chain_height 1 uint64 optional
vm.BuildBlockResponse
    id 1 bytes
    parent_id 2 bytes
    bytes 3 bytes
    height 4 uint64
    timestamp 5 google.protobuf.Timestamp
    verify_with_context 6 bool
vm.ParseBlockRequest
    bytes 1 bytes
vm.ParseBlockResponse
    id 1 bytes
    parent_id 2 bytes
    height 4 uint64
    timestamp 5 google.protobuf.Timestamp
    verify_with_context 6 bool
vm.GetBlockRequest
    id 1 bytes
vm.GetBlockResponse
    parent_id 1 bytes
    bytes 2 bytes
    height 4 uint64
    timestamp 5 google.protobuf.Timestamp
    err 6 vm.Error
    verify_with_context 7 bool
vm.SetPreferenceRequest
    id 1 bytes
vm.BlockVerifyRequest
    bytes 1 bytes
    p_chain_height 2 uint64 optional
vm.BlockVerifyResponse
    timestamp 1 google.protobuf.Timestamp
vm.BlockAcceptRequest
    id 1 bytes
vm.BlockRejectRequest
    id 1 bytes
vm.HealthResponse
    details 1 bytes
vm.VersionResponse
    version 1 string
vm.AppRequestMsg
    node_id 1 bytes
    request_id 2 uint32
    deadline 3 google.protobuf.Timestamp
    request 4 bytes
vm.AppRequestFailedMsg
    node_id 1 bytes
    request_id 2 uint32
    error_code 3 sint32
    error_message 4 string
vm.AppResponseMsg
    node_id 1 bytes
    request_id 2 uint32
    response 3 bytes
vm.AppGossipMsg
    node_id 1 bytes
    msg 2 bytes
vm.ConnectedRequest
    node_id 1 bytes
    name 2 string
    major 3 uint32
    minor 4 uint32
    patch 5 uint32
vm.DisconnectedRequest
    node_id 1 bytes
vm.GetAncestorsRequest
    blk_id 1 bytes
    max_blocks_num 2 int32
    max_blocks_size 3 int32
    max_blocks_retrival_time 4 int64
vm.GetAncestorsResponse
    blks_bytes 1 bytes repeated
vm.BatchedParseBlockRequest
    request 1 bytes repeated
vm.BatchedParseBlockResponse
    response 1 vm.ParseBlockResponse repeated
vm.GetBlockIDAtHeightRequest
    height 1 uint64
vm.GetBlockIDAtHeightResponse
    blk_id 1 bytes
    err 2 vm.Error
vm.GatherResponse
    metric_families 1 io.prometheus.client.MetricFamily repeated
vm.StateSyncEnabledResponse
    enabled 1 bool
    err 2 vm.Error
vm.GetOngoingSyncStateSummaryResponse
    id 1 bytes
    height 2 uint64
    bytes 3 bytes
    err 4 vm.Error
vm.GetLastStateSummaryResponse
    id 1 bytes
    height 2 uint64
    bytes 3 bytes
    err 4 vm.Error
vm.ParseStateSummaryRequest
    bytes 1 bytes
vm.ParseStateSummaryResponse
    id 1 bytes
    height 2 uint64
    err 3 vm.Error
vm.GetStateSummaryRequest
    height 1 uint64
vm.GetStateSummaryResponse
    id 1 bytes
    bytes 2 bytes
    err 3 vm.Error
vm.StateSummaryAcceptRequest
    bytes 1 bytes
vm.StateSummaryAcceptResponse
    mode 1 vm.StateSummaryAcceptResponse.Mode
    err 2 vm.Error
vm.State
    STATE_UNSPECIFIED 0
    STATE_STATE_SYNCING 1
    STATE_BOOTSTRAPPING 2
    STATE_NORMAL_OP 3
vm.Error
    ERROR_UNSPECIFIED 0
    ERROR_CLOSED 1
    ERROR_NOT_FOUND 2
    ERROR_STATE_SYNC_NOT_IMPLEMENTED 3
vm.Message
    MESSAGE_UNSPECIFIED 0
    MESSAGE_BUILD_BLOCK 1
    MESSAGE_STATE_SYNC_FINISHED 2
vm.StateSummaryAcceptResponse.Mode
    MODE_UNSPECIFIED 0
    MODE_SKIPPED 1
    MODE_STATIC 2
    MODE_DYNAMIC 3
vm.VM/Initialize: vm.InitializeRequest -> vm.InitializeResponse
vm.VM/SetState: vm.SetStateRequest -> vm.SetStateResponse
vm.VM/Shutdown: google.protobuf.Empty -> google.protobuf.Empty
vm.VM/CreateHandlers: google.protobuf.Empty -> vm.CreateHandlersResponse
vm.VM/NewHTTPHandler: google.protobuf.Empty -> vm.NewHTTPHandlerResponse
vm.VM/WaitForEvent: google.protobuf.Empty -> vm.WaitForEventResponse
vm.VM/Connected: vm.ConnectedRequest -> google.protobuf.Empty
vm.VM/Disconnected: vm.DisconnectedRequest -> google.protobuf.Empty
vm.VM/BuildBlock: vm.BuildBlockRequest -> vm.BuildBlockResponse
vm.VM/ParseBlock: vm.ParseBlockRequest -> vm.ParseBlockResponse
vm.VM/GetBlock: vm.GetBlockRequest -> vm.GetBlockResponse
vm.VM/SetPreference: vm.SetPreferenceRequest -> google.protobuf.Empty
vm.VM/Health: google.protobuf.Empty -> vm.HealthResponse
vm.VM/Version: google.protobuf.Empty -> vm.VersionResponse
vm.VM/AppRequest: vm.AppRequestMsg -> google.protobuf.Empty
vm.VM/AppRequestFailed: vm.AppRequestFailedMsg -> google.protobuf.Empty
vm.VM/AppResponse: vm.AppResponseMsg -> google.protobuf.Empty
vm.VM/AppGossip: vm.AppGossipMsg -> google.protobuf.Empty
vm.VM/Gather: google.protobuf.Empty -> vm.GatherResponse
vm.VM/GetAncestors: vm.GetAncestorsRequest -> vm.GetAncestorsResponse
vm.VM/BatchedParseBlock: vm.BatchedParseBlockRequest -> vm.BatchedParseBlockResponse
vm.VM/GetBlockIDAtHeight: vm.GetBlockIDAtHeightRequest -> vm.GetBlockIDAtHeightResponse
vm.VM/StateSyncEnabled: google.protobuf.Empty -> vm.StateSyncEnabledResponse
vm.VM/GetOngoingSyncStateSummary: google.protobuf.Empty -> vm.GetOngoingSyncStateSummaryResponse
vm.VM/GetLastStateSummary: google.protobuf.Empty -> vm.GetLastStateSummaryResponse
vm.VM/ParseStateSummary: vm.ParseStateSummaryRequest -> vm.ParseStateSummaryResponse
vm.VM/GetStateSummary: vm.GetStateSummaryRequest -> vm.GetStateSummaryResponse
vm.VM/BlockVerify: vm.BlockVerifyRequest -> vm.BlockVerifyResponse
vm.VM/BlockAccept: vm.BlockAcceptRequest -> google.protobuf.Empty
vm.VM/BlockReject: vm.BlockRejectRequest -> google.protobuf.Empty
vm.VM/StateSummaryAccept: vm.StateSummaryAcceptRequest -> vm.StateSummaryAcceptResponse
vm.runtime.InitializeRequest
    protocol_version 1 uint32
    addr 2 string
vm.runtime.Runtime/Initialize: vm.runtime.InitializeRequest -> google.protobuf.Empty
io.prometheus.client.LabelPair
    name 1 string optional
    value 2 string optional
io.prometheus.client.Gauge
    value 1 double optional
io.prometheus.client.Counter
    value 1 double optional
    exemplar 2 io.prometheus.client.Exemplar
    created_timestamp 3 google.protobuf.Timestamp
io.prometheus.client.Quantile
    quantile 1 double optional
    value 2 double optional
io.prometheus.client.Summary
    sample_count 1 uint64 optional
    sample_sum 2 double optional
    quantile 3 io.prometheus.client.Quantile repeated
    created_timestamp 4 google.protobuf.Timestamp
io.prometheus.client.Untyped
    value 1 double optional
io.prometheus.client.Histogram
    sample_count 1 uint64 optional
    sample_count_float 4 double optional
    sample_sum 2 double optional
    bucket 3 io.prometheus.client.Bucket repeated
    created_timestamp 15 google.protobuf.Timestamp
    schema 5 sint32 optional
    zero_threshold 6 double optional
    zero_count 7 uint64 optional
    zero_count_float 8 double optional
    negative_span 9 io.prometheus.client.BucketSpan repeated
    negative_delta 10 sint64 repeated
    negative_count 11 double repeated
    positive_span 12 io.prometheus.client.BucketSpan repeated
    positive_delta 13 sint64 repeated
    positive_count 14 double repeated
    exemplars 16 io.prometheus.client.Exemplar repeated
io.prometheus.client.Bucket
    cumulative_count 1 uint64 optional
    cumulative_count_float 4 double optional
    upper_bound 2 double optional
    exemplar 3 io.prometheus.client.Exemplar
io.prometheus.client.BucketSpan
    offset 1 sint32 optional
    length 2 uint32 optional
io.prometheus.client.Exemplar
    label 1 io.prometheus.client.LabelPair repeated
    value 2 double optional
    timestamp 3 google.protobuf.Timestamp
io.prometheus.client.Metric
    label 1 io.prometheus.client.LabelPair repeated
    gauge 2 io.prometheus.client.Gauge
    counter 3 io.prometheus.client.Counter
    summary 4 io.prometheus.client.Summary
    untyped 5 io.prometheus.client.Untyped
    histogram 7 io.prometheus.client.Histogram
    timestamp_ms 6 int64 optional
io.prometheus.client.MetricFamily
    name 1 string optional
    help 2 string optional
    type 3 io.prometheus.client.MetricType optional
    metric 4 io.prometheus.client.Metric repeated
    unit 5 string optional
io.prometheus.client.MetricType
    COUNTER 0
    GAUGE 1
    SUMMARY 2
    UNTYPED 3
    HISTOGRAM 4
    GAUGE_HISTOGRAM 5
appsender.SendAppRequestMsg
    node_ids 1 bytes repeated
    request_id 2 uint32
    request 3 bytes
appsender.SendAppResponseMsg
    node_id 1 bytes
    request_id 2 uint32
    response 3 bytes
appsender.SendAppErrorMsg
    node_id 1 bytes
    request_id 2 uint32
    error_code 3 sint32
    error_message 4 string
appsender.SendAppGossipMsg
    node_ids 1 bytes repeated
    validators 2 uint64
    non_validators 3 uint64
    peers 4 uint64
    msg 5 bytes
appsender.AppSender/SendAppRequest: appsender.SendAppRequestMsg -> google.protobuf.Empty
appsender.AppSender/SendAppResponse: appsender.SendAppResponseMsg -> google.protobuf.Empty
appsender.AppSender/SendAppError: appsender.SendAppErrorMsg -> google.protobuf.Empty
appsender.AppSender/SendAppGossip: appsender.SendAppGossipMsg -> google.protobuf.Empty
"""

_TYPE_NAMES = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in vars(descriptor.FieldDescriptor).items()
    if name.startswith("TYPE_")
}


def _field(field: FieldDescriptor) -> str:
    kind = _TYPE_NAMES[field.type]
    if field.message_type is not None:
        kind = field.message_type.full_name
    elif field.enum_type is not None:
        kind = field.enum_type.full_name
    label = ""
    if field.is_repeated:
        label = " repeated"
    elif field.has_presence and field.message_type is None:
        label = " optional"
    return f"{field.name} {field.number} {kind}{label}"


def _messages(messages: list[Descriptor]) -> list[Descriptor]:
    found: list[Descriptor] = []
    for message in messages:
        found.append(message)
        found += _messages(list(message.nested_types))
    return found


def _render(files: list[FileDescriptor]) -> dict[str, list[str]]:
    """Each message, enum and method of ``files`` as FACTS writes it."""
    facts: dict[str, list[str]] = {}
    for file in files:
        messages = _messages(list(file.message_types_by_name.values()))
        for message in messages:
            facts[message.full_name] = [_field(field) for field in message.fields]
        enums = list(file.enum_types_by_name.values())
        enums += [enum for message in messages for enum in message.enum_types]
        for enum in enums:
            facts[enum.full_name] = [f"{value.name} {value.number}" for value in enum.values]
        for service in file.services_by_name.values():
            for method in service.methods:
                facts[
                    f"{service.full_name}/{method.name}: {method.input_type.full_name} -> "
                    f"{method.output_type.full_name}"
                ] = []
    return facts


def _parse(text: str) -> dict[str, list[str]]:
    facts: dict[str, list[str]] = {}
    name = ""
    for line in text.strip().splitlines():
        if line.startswith("    "):
            facts[name].append(line.strip())
        else:
            name = line
            facts[name] = []
    return facts


def test_the_compiled_protocol_holds_avalanchegos_facts() -> None:
    expected = _parse(FACTS)
    compiled = _render(
        [
            vm_pb2.DESCRIPTOR,
            runtime_pb2.DESCRIPTOR,
            metrics_pb2.DESCRIPTOR,
            appsender_pb2.DESCRIPTOR,
        ]
    )
    assert sorted(compiled) == sorted(expected), "messages, enums or methods differ"
    for name, fields in expected.items():
        assert compiled[name] == fields, name


def test_the_packages_and_the_protocol_version() -> None:
    """The wire names gRPC routes by and the version a plugin announces."""
    assert PROTOCOL_VERSION == 45
    assert (
        vm_pb2.DESCRIPTOR.package,
        runtime_pb2.DESCRIPTOR.package,
        metrics_pb2.DESCRIPTOR.package,
        appsender_pb2.DESCRIPTOR.package,
    ) == ("vm", "vm.runtime", "io.prometheus.client", "appsender")
    assert [service.full_name for service in vm_pb2.DESCRIPTOR.services_by_name.values()] == [
        "vm.VM"
    ]


def test_fujis_epoch_duration_reads_as_the_duration_it_is() -> None:
    """avalanchego (v1.14.2 and later) sends Granite's epoch duration as field 17, a
    ``google.protobuf.Duration``, and Helicon's time as field 18: Fuji's five minutes read
    as five minutes here, not as a Helicon time of 1970-01-01 00:05."""
    from google.protobuf.duration_pb2 import Duration
    from google.protobuf.timestamp_pb2 import Timestamp

    # Field 17 (length-delimited), then field 18, as a Go node encodes them.
    duration = Duration(seconds=300).SerializeToString()
    helicon = Timestamp(seconds=1_760_000_000).SerializeToString()
    wire = (
        bytes([(17 << 3) | 2, 0x01, len(duration)])
        + duration
        + bytes([(18 << 3) | 2, 0x01, len(helicon)])
        + helicon
    )
    upgrades = vm_pb2.NetworkUpgrades.FromString(wire)
    assert upgrades.granite_epoch_duration.seconds == 300
    assert upgrades.helicon_time.seconds == 1_760_000_000
