"""Analysis of embedding spaces and of what compression keeps."""

from .metrics import neighbour_recall
from .retrieval import RetrievalScores, evaluate_run, mrr_at_k, ndcg_at_k, recall_at_k, retention

__all__ = ["RetrievalScores", "evaluate_run", "mrr_at_k", "ndcg_at_k", "neighbour_recall", "recall_at_k", "retention"]
