//! The management service: the cluster map, target registration, pools.
