"""Who may do what: ACLs (Kafka's StandardAuthorizer), the SASL exchange, failed-login limits, dynamic TLS files."""
