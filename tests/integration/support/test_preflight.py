"""The run's start-up check of the real clusters (tests/support/preflight.py): each answers
with its store's figures and health, and a cluster over the threshold is refused with its
name. (The threshold is lowered here instead of filling a shared cluster.)"""

from __future__ import annotations

import pytest

from tests.support.preflight import CLUSTERS, check_cluster


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_clusters_are_fit_and_one_over_the_threshold_is_named(cluster: str) -> None:
    assert check_cluster(cluster) is None
    problem = check_cluster(cluster, full_at=0.0)
    assert problem is not None
    assert problem.startswith(f"{cluster}: osd.0 holds "), problem
    assert "GiB" in problem


def test_a_cluster_that_does_not_answer_is_named() -> None:
    problem = check_cluster("no-such-cluster")
    assert problem is not None
    assert problem.startswith("no-such-cluster: does not answer"), problem
