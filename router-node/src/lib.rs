//! switchyard-node (in progress)
