// Package jobs is sqsworker's job model: typed job arguments ([Args]), the job a worker receives
// ([Job]), workers ([Worker], [WorkFunc]), the [Registry] that maps kinds to workers with their
// options, the errors that steer a job ([Cancel], [RetryAfter]), the retry [Policy], and the
// envelope v1 wire format ([Envelope]) that producers in any language send.
//
// It is the ground floor of the module and imports no other sqsworker package.
package jobs
