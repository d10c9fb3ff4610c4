//! The metadata service: one MDT on redb, with group commit, a reply cache, precreated objects and background destroys.
