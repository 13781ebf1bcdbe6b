"""Write the Chakra trace of experiments/chakra-tp-dp.yaml: 8 ranks, one training step of a toy model.

Each rank computes its forward pass (500 us), allreduces 32 MiB with its tensor-parallel partner
(process group ``tp0``..``tp3``: ranks 2k and 2k+1, on one host), allreduces 64 MiB of gradients
over all 8 ranks (``dp``), sends 16 MiB of activations to the rank 4 places on (the other leaf;
ranks 4-7 receive) and computes 200 us more (the receivers only once the message has arrived).

Run from the repository root: ``python experiments/traces/chakra-tp-dp/make_trace.py``.
"""

from pathlib import Path

from netsim.workload.chakra import coll_node, comp_node, recv_node, send_node, write_trace

MiB = 2**20


def rank_nodes(r: int, n: int = 8) -> list:
    nodes = [comp_node(0, 500, name="forward"),
             coll_node(1, "allreduce", 32 * MiB, deps=[0], pg_name=f"tp{r // 2}", name="tp_allreduce"),
             coll_node(2, "allreduce", 64 * MiB, deps=[1], pg_name="dp", name="dp_allreduce")]
    half = n // 2
    if r < half:
        nodes.append(send_node(3, r, r + half, 16 * MiB, tag=1, deps=[2], name="send_activations"))
    else:
        nodes.append(recv_node(3, r - half, r, 16 * MiB, tag=1, deps=[2], name="recv_activations"))
    nodes.append(comp_node(4, 200, deps=[3], name="backward"))
    return nodes


if __name__ == "__main__":
    files = write_trace(Path(__file__).with_name("trace"), [rank_nodes(r) for r in range(8)])
    print("\n".join(str(f) for f in files))
