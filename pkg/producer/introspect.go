package producer

// RecordsStatus reports whether the producer records the jobs it sends in the job table
// (Config.Status is set): queued after SQS accepted a job, scheduled after the scheduler did.
// A caller that needs the record (pkg/dedup judges a unique key's job by it) writes it itself
// when the producer does not.
func (p *Producer) RecordsStatus() bool { return p.status != nil }

// DeduplicationID returns the FIFO deduplication id the producer derives for a job of kind with
// the effective key key when the job has no WithDeduplicationID: "kind:key", or its hex SHA-256
// when that is longer than 128 characters or has characters SQS does not allow. A caller can
// compare it with Message.DeduplicationID to tell whether a prepared job carries an id of its
// own.
func DeduplicationID(kind, key string) string { return deduplicationID(kind, key) }

// QueueOf returns the name of the queue a job of kind goes to when it names none
// (WithQueue): its route (Config.Routes) among Config.Queues, else the default queue; for a
// producer of one queue, queues.DefaultName. A kind routed to a queue the set does not have is
// an error wrapping queues.ErrUnknownQueue. The console shows it on its Enqueue page.
func (p *Producer) QueueOf(kind string) (string, error) {
	if p.set == nil {
		return p.name, nil
	}
	q, err := p.set.Route(p.routes, kind, "")
	if err != nil {
		return "", err
	}
	return q.Name, nil
}
