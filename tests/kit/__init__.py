"""The test kit: what tests/, compat_tests/ and bench/ share to start brokers and talk to them."""
