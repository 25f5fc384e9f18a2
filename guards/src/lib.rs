//! Ward's ownership-aware guards, one file per guard. Nothing is public yet:
//! the guards land with issue #4.
