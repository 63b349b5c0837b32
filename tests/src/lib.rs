//! Black-box tests live in `e2e/`; this library is empty.
