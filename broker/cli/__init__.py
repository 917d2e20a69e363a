"""The `gregor` command line: the broker's start (`gregor serve`) and the operator's commands, a Kafka client of the broker."""
