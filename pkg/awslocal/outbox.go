package awslocal

// OutboxTableName returns a stack's transactional outbox table name: "<stack>-outbox". Create
// it with dynamooutbox.CreateTable (this package does not import the outbox, whose tests use
// this package).
func OutboxTableName(stack string) string { return stack + "-outbox" }
