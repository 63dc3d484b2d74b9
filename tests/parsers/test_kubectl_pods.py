"""``kubectl get pods -o wide`` and ``kubectl describe pod``: the node each pod ran on (fixtures invented)."""

from __future__ import annotations

from gpulib.parsers import kubectl_pods

WIDE = """$ kubectl -n vision get pods -o wide -l job-name=seg-ft
NAME               READY   STATUS      RESTARTS   AGE   IP             NODE           NOMINATED NODE   READINESS GATES
seg-ft-master-0    0/1     Completed   0          3h    10.88.1.14     gpu-k8s-n07    <none>           <none>
seg-ft-worker-0    0/1     Error       1          3h    10.88.4.2      gpu-k8s-n12    <none>           <none>
seg-ft-worker-1    0/1     Pending     0          3h    <none>         <none>         <none>           <none>
"""
ALL_NAMESPACES = """NAMESPACE   NAME            READY   STATUS    RESTARTS   AGE   IP           NODE          NOMINATED NODE
vision      seg-ft-worker-3 1/1     Running   0          12m   10.88.9.30   gpu-k8s-n31   <none>
"""
DESCRIBE = """Name:             seg-ft-worker-2
Namespace:        vision
Priority:         0
Service Account:  default
Node:             gpu-k8s-n19/10.60.3.19
Start Time:       Sat, 05 Dec 2026 01:10:44 +0000
Events:
  Type    Reason     Age   From               Message
  ----    ------     ----  ----               -------
  Normal  Scheduled  3h    default-scheduler  Successfully assigned vision/seg-ft-worker-2 to gpu-k8s-n19
"""


def test_wide_listing_places_each_pod_and_leaves_an_unplaced_one_nowhere():
    assert kubectl_pods.looks_like(WIDE)
    result = kubectl_pods.parse(WIDE, "pods.txt")
    assert result.problems == []
    assert [(p.pod, p.node, p.pod_ip, p.status) for p in result.records] == [
        ("seg-ft-master-0", "gpu-k8s-n07", "10.88.1.14", "Completed"),
        ("seg-ft-worker-0", "gpu-k8s-n12", "10.88.4.2", "Error"),
        ("seg-ft-worker-1", None, None, "Pending")]


def test_all_namespaces_listing_keeps_the_namespace():
    result = kubectl_pods.parse(ALL_NAMESPACES, "pods.txt")
    assert [(p.namespace, p.pod, p.node) for p in result.records] == [("vision", "seg-ft-worker-3", "gpu-k8s-n31")]


def test_describe_pod_header_and_scheduled_event():
    assert kubectl_pods.looks_like(DESCRIBE)
    result = kubectl_pods.parse(DESCRIBE, "describe.txt")
    assert {(p.pod, p.node) for p in result.records} == {("seg-ft-worker-2", "gpu-k8s-n19")}


def test_other_tables_are_not_pod_listings_and_garbage_is_a_problem():
    nodes = "NAME          STATUS   ROLES    AGE   VERSION\ngpu-k8s-n07   Ready    <none>   40d   v1.29.4\n"
    assert not kubectl_pods.looks_like(nodes)
    result = kubectl_pods.parse("\x00\x01 not a listing\n", "junk.txt")
    assert result.records == [] and result.problems
    truncated = kubectl_pods.parse(WIDE.splitlines()[1] + "\nseg-ft-mas", "cut.txt")
    assert truncated.records == [] and truncated.problems
