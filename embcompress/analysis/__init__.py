"""Analysis of embedding spaces and of what compression keeps."""

from .intrinsic import (
    IntrinsicDimension,
    Preservation,
    alignment,
    intrinsic_dimensionality,
    knn_accuracy,
    local_spearman,
    preservation,
    rank_rows,
    spearman,
    uniformity,
)
from .metrics import neighbour_recall, neighbour_recall_per_query, pseudo_relevance_ndcg
from .retrieval import (
    JudgedQueries,
    RetrievalScores,
    check_qrels,
    check_unique_ids,
    evaluate_run,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
    retention,
)

__all__ = [
    "IntrinsicDimension",
    "JudgedQueries",
    "Preservation",
    "RetrievalScores",
    "alignment",
    "check_qrels",
    "check_unique_ids",
    "rank_rows",
    "spearman",
    "evaluate_run",
    "intrinsic_dimensionality",
    "knn_accuracy",
    "local_spearman",
    "mrr_at_k",
    "ndcg_at_k",
    "neighbour_recall",
    "neighbour_recall_per_query",
    "pseudo_relevance_ndcg",
    "preservation",
    "recall_at_k",
    "retention",
    "uniformity",
]
