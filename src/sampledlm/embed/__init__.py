"""Word embeddings: word2vec's skip-gram and CBOW with negative sampling or hierarchical softmax,
word2vec text/binary files, similarity and analogy evaluation, NNLM projections as word vectors."""
