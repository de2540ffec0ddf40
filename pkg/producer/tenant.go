package producer

import "github.com/sqsworker/sqsworker/pkg/jobs"

// WithTenant names the tenant the job belongs to, for fairness between tenants:
//   - it sets the envelope's meta "tenant" (jobs.MetaTenant), which per-tenant flow limits read
//     (flow.TenantKey: at most N jobs of one tenant at once, or per second, whoever sends them);
//   - it sets the SQS message group id to the tenant, unless WithGroupID sets another: on a
//     standard queue that makes it an SQS fair queue, where a tenant with a backlog no longer
//     delays the others (SQS delivers the quiet tenants' messages first; no queue setting is
//     needed). On a FIFO queue the group also orders: the tenant's jobs then run one at a time,
//     in order.
//
// The tenant follows WithGroupID's rules: 1 to 128 characters, letters, digits and ASCII
// punctuation. WithGroupID, before or after, keeps its group; WithMeta("tenant", …) after it
// overrides the meta.
func WithTenant(tenant string) Option {
	return func(o *options) {
		if !o.groupSet {
			o.group, o.groupSet = tenant, true
		}
		if o.meta == nil {
			o.meta = make(map[string]string, 2)
		}
		o.meta[jobs.MetaTenant] = tenant
	}
}
