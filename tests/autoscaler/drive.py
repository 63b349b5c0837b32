"""Drives meson's cluster-autoscaler endpoint as the upstream autoscaler's
`externalgrpc` cloud provider does, with a client generated at run time (by
grpcio-tools' protoc) from the protocol's .proto files in proto/.

    drive.py up   --address A --ca F --cert F --key F   # scale the one group up by one
    drive.py down --address A --ca F --cert F --key F   # delete the node `up` added

Prints one JSON line of what it saw; exits non-zero (saying why) when meson
does not answer as the protocol expects.
"""

import argparse
import importlib
import json
import pathlib
import sys
import tempfile
import time

import grpc
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def stubs():
    """The protocol's Python messages and client stub, compiled now."""
    out = tempfile.mkdtemp(prefix="externalgrpc-")
    include = str(pathlib.Path(protoc.__file__).parent / "_proto")
    rc = protoc.main([
        "protoc", f"-I{ROOT / 'proto'}", f"-I{include}",
        f"--python_out={out}", f"--grpc_python_out={out}",
        "externalgrpc/externalgrpc.proto", "k8s/core.proto",
    ])
    if rc != 0:
        sys.exit(f"protoc failed ({rc})")
    sys.path.insert(0, out)
    pb = importlib.import_module("externalgrpc.externalgrpc_pb2")
    rpc = importlib.import_module("externalgrpc.externalgrpc_pb2_grpc")
    k8s = importlib.import_module("k8s.core_pb2")
    return pb, rpc, k8s


def fail(msg):
    sys.exit(f"drive.py: {msg}")


def expect_error(code, call, *args):
    try:
        call(*args)
    except grpc.RpcError as e:
        if e.code() != code:
            fail(f"expected {code}, got {e.code()}: {e.details()}")
        return e.details()
    fail(f"expected {code}, the call succeeded")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=["up", "down"])
    ap.add_argument("--address", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--timeout", type=float, default=90)
    a = ap.parse_args()
    pb, rpc, k8s = stubs()

    creds = grpc.ssl_channel_credentials(
        root_certificates=pathlib.Path(a.ca).read_bytes(),
        private_key=pathlib.Path(a.key).read_bytes(),
        certificate_chain=pathlib.Path(a.cert).read_bytes(),
    )
    # The endpoint's certificate names `localhost` (the autoscaler dials a
    # name the certificate holds).
    channel = grpc.secure_channel(
        a.address, creds, options=[("grpc.ssl_target_name_override", "localhost")]
    )
    cp = rpc.CloudProviderStub(channel)

    groups = cp.NodeGroups(pb.NodeGroupsRequest()).nodeGroups
    if len(groups) != 1:
        fail(f"expected one node group, got {list(groups)}")
    g = groups[0]

    def instances():
        return list(cp.NodeGroupNodes(pb.NodeGroupNodesRequest(id=g.id)).instances)

    def wait_for(size):
        deadline = time.time() + a.timeout
        while time.time() < deadline:
            nodes = instances()
            running = [
                n for n in nodes
                if n.status.instanceState == pb.InstanceStatus.instanceRunning
            ]
            if len(nodes) == size and len(running) == size:
                return nodes
            time.sleep(0.2)
        fail(f"the group did not reach {size} running nodes: {instances()}")

    target = cp.NodeGroupTargetSize(pb.NodeGroupTargetSizeRequest(id=g.id)).targetSize
    state = pathlib.Path(a.cert).with_suffix(".added")

    if a.phase == "up":
        before = {n.id for n in wait_for(target)}
        # The template node the autoscaler simulates scale-ups with.
        info = cp.NodeGroupTemplateNodeInfo(pb.NodeGroupTemplateNodeInfoRequest(id=g.id))
        node = k8s.Node()
        node.ParseFromString(info.nodeBytes)
        if node != info.nodeInfo:
            fail("nodeBytes and nodeInfo describe different nodes")
        cp.NodeGroupIncreaseSize(pb.NodeGroupIncreaseSizeRequest(id=g.id, delta=1))
        after = wait_for(target + 1)
        added = [n.id for n in after if n.id not in before]
        if len(added) != 1:
            fail(f"expected one new node, got {added}")
        owner = cp.NodeGroupForNode(
            pb.NodeGroupForNodeRequest(node=pb.ExternalGrpcNode(providerID=added[0]))
        ).nodeGroup
        if owner.id != g.id:
            fail(f"the new node's group is {owner.id!r}, not {g.id!r}")
        too_many = expect_error(
            grpc.StatusCode.INVALID_ARGUMENT, cp.NodeGroupIncreaseSize,
            pb.NodeGroupIncreaseSizeRequest(id=g.id, delta=g.maxSize),
        )
        unknown = expect_error(
            grpc.StatusCode.NOT_FOUND, cp.NodeGroupTargetSize,
            pb.NodeGroupTargetSizeRequest(id="no-such-group"),
        )
        state.write_text(added[0])
        print(json.dumps({
            "group": g.id, "min": g.minSize, "max": g.maxSize,
            "target": target + 1, "added": added[0],
            "template": {
                "cpu": node.status.capacity["cpu"].string,
                "memory": node.status.capacity["memory"].string,
                "labels": dict(node.metadata.labels),
            },
            "too_many": too_many, "unknown": unknown,
        }))
    else:
        added = state.read_text()
        cp.NodeGroupDeleteNodes(pb.NodeGroupDeleteNodesRequest(
            id=g.id, nodes=[pb.ExternalGrpcNode(providerID=added)],
        ))
        after = wait_for(target - 1)
        if any(n.id == added for n in after):
            fail(f"{added} is still in the group")
        below_min = expect_error(
            grpc.StatusCode.INVALID_ARGUMENT, cp.NodeGroupDecreaseTargetSize,
            pb.NodeGroupDecreaseTargetSizeRequest(id=g.id, delta=-1),
        )
        print(json.dumps({
            "group": g.id, "target": target - 1, "deleted": added,
            "left": [n.id for n in after], "below_min": below_min,
        }))


if __name__ == "__main__":
    main()
