"""The papers the methods come from, cited by short name in docstrings, help and reports."""

REFERENCES = {
    "Dinu et al., 2025": "G. Dinu, C. Barrett, Y. Xiang, M. Romero Calvo, A. Currey, X. Niu. Effective post-training "
    "embedding compression via temperature control in contrastive training. 2025.",
    "Kalyfommatos et al., 2025": "K. Kalyfommatos, A. Michail, M. Huber, B. Psomas, S. Clematide, J. Opitz. "
    "Geometry-Preserving Dimensionality Reduction for Text Embeddings. 2025.",
    '"Cropping outperforms dropout", 2025': "Cropping outperforms dropout as an augmentation strategy for training "
    "self-supervised text embeddings. Anonymous authors, under review, 2025.",
    "Gong & Lazebnik, 2011": "Y. Gong, S. Lazebnik. Iterative Quantization: A Procrustean Approach to Learning Binary "
    "Codes. CVPR 2011 (TPAMI 2013).",
    "Jegou et al., "
    "2011": "H. Jegou, M. Douze, C. Schmid. Product Quantization for Nearest Neighbor Search. TPAMI 2011.",
    "Ge et al., 2013": "T. Ge, K. He, Q. Ke, J. Sun. Optimized Product Quantization. CVPR 2013 / TPAMI 2014.",
    "Gao & Long, 2024": "J. Gao, C. Long. RaBitQ: Quantizing High-Dimensional Vectors with a Theoretical Error Bound "
    "for Approximate Nearest Neighbor Search. SIGMOD 2024.",
    "Gao et al., 2024": "J. Gao, Y. Gou, Y. Xu, Y. Yang, C. Long, R. C.-W. Wong. Practical and Asymptotically Optimal "
    "Quantization of High-Dimensional Vectors in Euclidean Space for Approximate Nearest Neighbor "
    "Search (extended RaBitQ). 2024.",
    "Yamada et al., 2021": "I. Yamada, A. Asai, H. Hajishirzi. Efficient Passage Retrieval with Hashing for "
    "Open-domain Question Answering. ACL 2021.",
}
