package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbretry"
	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// DynamoDBAPI is the part of the DynamoDB client DynamoDBStore uses.
type DynamoDBAPI interface {
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// DynamoDBConfig configures NewDynamoDBStore.
type DynamoDBConfig struct {
	// Client talks to DynamoDB. Required.
	Client DynamoDBAPI
	// Table is the job table (see TableInput). Required.
	Table string
	// Shards is the number of by-status index partitions per state; pkg/status must use the same
	// value to list them. Defaults to DefaultShards (16).
	Shards int
	// Layout is where jobs' items are written (see Layout): LayoutKindKey keeps the layout of
	// earlier releases while a table may still receive deliveries of jobs claimed under it.
	// Records of both layouts are read either way. Defaults to LayoutByID.
	Layout Layout
}

// DynamoDBStore is a Store on one DynamoDB table (see TableInput for its design).
//
// Writes per job: a successful claim and its finish are one conditional write each. A claim
// hinted Fresh (the job has no record yet, ClaimRequest.Fresh) is a PutItem conditioned on there
// being no item, with only the attributes a new record has; otherwise, and when that PutItem is
// refused by a record, it is the general claim: one conditional UpdateItem. A refused write costs
// one strongly consistent GetItem more when the backend does not return the old item with the
// ConditionalCheckFailedException (real DynamoDB does, with ReturnValuesOnConditionCheckFailure;
// some emulators do not). A claim whose AttemptsBefore is above 0 but below the record's runs (a
// stale re-sent copy) costs one refused write more (see Claim). The finish of a claim is an
// UpdateItem conditioned on its token.
//
// Expired records: an expired record must count as absent (its runs restart at 1, its payload
// hash and error no longer count), which one conditional UpdateItem cannot express, so the
// claim's UpdateItem only accepts records that have not expired. When it is refused by an
// expired record, the store replaces that record with a PutItem conditioned on the record being
// the one it read (same exp, upd and tok), and starts over if someone changed it meanwhile
// (bounded). That second write happens only for records past their expiry that DynamoDB's TTL
// has not deleted yet.
//
// Transaction conflicts: a write to a record that a DynamoDB transaction holds at that moment (the
// transactional outbox writes a job's queued record in its transaction) is refused with a
// TransactionConflictException, which the AWS SDK does not retry. Such a write changed nothing, so
// the store sends it again, up to 6 times in all with a jittered backoff (at most 775 ms of waits;
// internal/ddbretry); a claim still refused then fails with the error, and the middleware defers
// the job (MiddlewareConfig.StoreRetryDelay).
type DynamoDBStore struct {
	client DynamoDBAPI
	table  string
	shards int
	layout Layout
}

var (
	_ Store       = (*DynamoDBStore)(nil)
	_ ClaimReader = (*DynamoDBStore)(nil)
)

// NewDynamoDBStore validates cfg and returns the store.
func NewDynamoDBStore(cfg DynamoDBConfig) (*DynamoDBStore, error) {
	if cfg.Client == nil {
		return nil, errors.New("idempotency: DynamoDBConfig.Client is required")
	}
	if err := validTableName(cfg.Table); err != nil {
		return nil, err
	}
	if cfg.Shards == 0 {
		cfg.Shards = DefaultShards
	}
	if cfg.Shards < 1 || cfg.Shards > 1000 {
		return nil, fmt.Errorf("idempotency: DynamoDBConfig.Shards %d out of range 1-1000", cfg.Shards)
	}
	if !cfg.Layout.Valid() {
		return nil, fmt.Errorf("idempotency: DynamoDBConfig.Layout %v is not a layout", cfg.Layout)
	}
	return &DynamoDBStore{client: cfg.Client, table: cfg.Table, shards: cfg.Shards, layout: cfg.Layout}, nil
}

func validTableName(s string) error {
	if len(s) < 3 || len(s) > 255 {
		return fmt.Errorf("idempotency: DynamoDBConfig.Table %q must be 3-255 characters", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("idempotency: DynamoDBConfig.Table %q may only contain [A-Za-z0-9_.-]", s)
		}
	}
	return nil
}

// expr builds an expression's attribute names and values, keeping only those used (DynamoDB
// rejects unused ones). Every attribute goes through a name placeholder, since several of ours
// are reserved words (key, hash). No placeholder may begin another, which the embedded emulator
// needs (it substitutes names as text, in random order: awslocal.ErrPlaceholderPrefix); our
// attribute names do begin one another (ckpt, ckpt_at), so a placeholder is "#" + name + "X":
// names are lower case, so the X ends each one where no other goes on.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// n returns the placeholder of attribute name (lower case: the Attr constants).
func (e *expr) n(name string) string {
	p := "#" + name + "X"
	e.names[p] = name
	return p
}

// v binds placeholder (":name") to av and returns it.
func (e *expr) v(placeholder string, av types.AttributeValue) string {
	e.values[placeholder] = av
	return placeholder
}

func (e *expr) valuesOrNil() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

// update accumulates SET and REMOVE actions.
type update struct {
	e           *expr
	set, remove []string
}

func (u *update) setTo(name, value string) { u.set = append(u.set, u.e.n(name)+" = "+value) }
func (u *update) rm(names ...string) {
	for _, n := range names {
		u.remove = append(u.remove, u.e.n(n))
	}
}

func (u *update) String() string {
	var b strings.Builder
	if len(u.set) > 0 {
		b.WriteString("SET " + strings.Join(u.set, ", "))
	}
	if len(u.remove) > 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("REMOVE " + strings.Join(u.remove, ", "))
	}
	return b.String()
}

// keyOf returns the primary key of the item with partition key pk.
func keyOf(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: avS(pk)}
}

// Claim implements Store: one conditional UpdateItem (see DynamoDBStore for refused and expired
// records).
func (s *DynamoDBStore) Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	if err := validateClaim(&req); err != nil {
		return ClaimResult{}, err
	}
	if err := s.layout.checkSize(req.Kind, req.Key, req.JobID); err != nil {
		return ClaimResult{}, err
	}
	// With AttemptsBefore, runs becomes max(runs, AttemptsBefore) + 1, which one update
	// expression cannot compute: the first write sets AttemptsBefore + 1 where runs ≤
	// AttemptsBefore (no record, a producer's record with 0 runs, a re-sent copy that carries the
	// record's runs), and only a record with more runs costs a second write that adds 1.
	setRuns := req.AttemptsBefore > 0
	pk := s.layout.ItemKey(req.Kind, req.Key, req.JobID)
	put := req.Fresh
	for range maxClaimRounds {
		var (
			rec            Record
			claimed, found bool
			err            error
		)
		if put {
			put = false // once: a record refused it, or it was deleted since
			rec, claimed, found, err = s.claimPut(ctx, &req, pk)
		} else {
			rec, claimed, found, err = s.claimUpdate(ctx, &req, pk, setRuns)
		}
		if err != nil {
			return ClaimResult{}, err
		}
		if claimed {
			return ClaimResult{Claimed: true, Record: rec}, nil
		}
		if !found {
			continue // deleted (TTL) between the refused write and the read: try again
		}
		if rec.State == StateRunning && rec.Token == req.Token {
			// Our own earlier attempt won: the SDK retried an UpdateItem whose response was
			// lost, and the retry was refused by the claim it had made.
			return ClaimResult{Claimed: true, Record: rec}, nil
		}
		if !rec.Expired(req.Now) {
			if claimable(&rec, &req) {
				if setRuns && rec.Runs > req.AttemptsBefore {
					setRuns = false // refused by the runs condition: add 1 instead
				}
				continue // or changed between the refused write and the read: try again
			}
			return ClaimResult{Record: rec}, nil
		}
		fresh, ok, err := s.replaceExpired(ctx, &req, pk, &rec)
		if err != nil {
			return ClaimResult{}, err
		}
		if ok {
			return ClaimResult{Claimed: true, Record: fresh}, nil
		}
	}
	return ClaimResult{}, fmt.Errorf("idempotency: claim %s: the record changed under %d claim attempts in a row",
		pk, maxClaimRounds)
}

// claimPut is the claim of a job hinted Fresh: one PutItem of a new record, conditioned on there
// being no item. It returns the record written (claimed), or the item that refused it (found;
// not found when it was deleted before it could be read), as claimUpdate does.
func (s *DynamoDBStore) claimPut(ctx context.Context, req *ClaimRequest, pk string) (rec Record, claimed, found bool, err error) {
	rec = freshRecord(req)
	_, err = s.putItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                s.layout.Item(rec, s.shards),
		ConditionExpression:                 aws.String("attribute_not_exists(" + AttrPK + ")"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return rec, true, true, nil
	}
	return s.refusal(ctx, "claim", pk, err)
}

// refusal explains a refused conditional write to the item pk: the item that refused it (found),
// from the ConditionalCheckFailedException or else a strongly consistent read; not found when the
// item is gone. Other errors are returned.
func (s *DynamoDBStore) refusal(ctx context.Context, op, pk string, err error) (rec Record, claimed, found bool, _ error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return Record{}, false, false, fmt.Errorf("idempotency: %s %s: %w", op, pk, err)
	}
	if len(ccf.Item) > 0 {
		if rec, err = RecordFromItem(ccf.Item); err != nil {
			return Record{}, false, false, fmt.Errorf("idempotency: %s %s: %w", op, pk, err)
		}
		return rec, false, true, nil
	}
	// The backend did not return the old item (ALL_OLD ignored): read it, strongly consistent.
	rec, err = s.getPK(ctx, pk)
	switch {
	case errors.Is(err, ErrNotFound):
		return Record{}, false, false, nil
	case err != nil:
		return Record{}, false, false, err
	}
	return rec, false, true, nil
}

// claimUpdate runs the claim's UpdateItem. It returns the record after the claim (claimed), or
// the record that refused it (found; not found when it was deleted before it could be read).
// setRuns sets runs to AttemptsBefore + 1, on the condition that runs ≤ AttemptsBefore;
// otherwise runs grows by 1.
func (s *DynamoDBStore) claimUpdate(ctx context.Context, req *ClaimRequest, pk string, setRuns bool) (rec Record, claimed, found bool, err error) {
	e := newExpr()
	nowMs := e.v(":now", avN(unixMs(req.Now)))
	running := e.v(":running", avS(string(StateRunning)))
	dead := e.v(":dead", avS(string(StateDead)))
	deadOK := e.n(AttrState) + " = " + dead // a dead record may be claimed (a redriven job)…
	if req.MessageID != "" {
		// …but not by the very message that was dead-lettered (its DLQ send failed).
		deadOK = "(" + deadOK + " AND (attribute_not_exists(" + e.n(AttrDeadMsg) + ") OR " + e.n(AttrDeadMsg) +
			" <> " + e.v(":msg", avS(req.MessageID)) + "))"
	}
	cond := "(attribute_not_exists(" + e.n(AttrPK) + ") OR " +
		e.n(AttrState) + " IN (" + e.v(":queued", avS(string(StateQueued))) + ", " +
		e.v(":scheduled", avS(string(StateScheduled))) + ", " + e.v(":retrying", avS(string(StateRetrying))) + ") OR " +
		deadOK + " OR " +
		"(" + e.n(AttrState) + " = " + running + " AND " + e.n(AttrLease) + " <= " + nowMs +
		// A cancellation requested while it ran: the middleware records it (claimable).
		" AND attribute_not_exists(" + e.n(AttrCancelAt) + ")))" +
		// An expired record is replaced by replaceExpired, never updated: a missing exp never expires.
		" AND (attribute_not_exists(" + e.n(AttrExpires) + ") OR " + e.n(AttrExpires) + " > " +
		e.v(":nowSec", avN(req.Now.Unix())) + ")"
	if req.PayloadHash != "" {
		cond += " AND (attribute_not_exists(" + e.n(AttrHash) + ") OR " + e.n(AttrHash) + " = " +
			e.v(":hash", avS(req.PayloadHash)) + ")"
	} else {
		cond += " AND attribute_not_exists(" + e.n(AttrHash) + ")"
	}
	if setRuns {
		cond += " AND (attribute_not_exists(" + e.n(AttrRuns) + ") OR " + e.n(AttrRuns) + " <= " +
			e.v(":before", avN(int64(req.AttemptsBefore))) + ")"
	}

	u := &update{e: e}
	u.setTo(AttrState, running)
	u.setTo(AttrToken, e.v(":tok", avS(req.Token)))
	u.setTo(AttrLease, e.v(":lease", avN(unixMs(req.LeaseUntil))))
	u.setTo(AttrKind, e.v(":kind", avS(req.Kind)))
	idKeyed := s.layout.IDKeyed(req.Key, req.JobID)
	if !idKeyed || pk != IDKeyPrefix+req.Key {
		u.setTo(AttrKey, e.v(":key", avS(req.Key)))
	}
	if req.PayloadHash != "" {
		u.setTo(AttrHash, ":hash")
	}
	switch {
	case idKeyed: // the partition key is the job id: no by_id index entry
	case req.JobID != "":
		u.setTo(AttrJobID, e.v(":job", avS(req.JobID)))
	default:
		u.rm(AttrJobID) // an empty string cannot be an index key
	}
	if setRuns {
		u.setTo(AttrRuns, e.v(":runs", avN(int64(req.AttemptsBefore)+1)))
	} else {
		u.setTo(AttrRuns, "if_not_exists("+e.n(AttrRuns)+", "+e.v(":zero", avN(0))+") + "+e.v(":one", avN(1)))
	}
	u.setTo(AttrFirstAt, "if_not_exists("+e.n(AttrFirstAt)+", "+nowMs+")")
	u.setTo(AttrLastAt, nowMs)
	u.setTo(AttrUpdated, nowMs)
	if req.ExpiresAt.IsZero() {
		u.rm(AttrExpires)
	} else {
		u.setTo(AttrExpires, e.v(":exp", avN(expSeconds(req.ExpiresAt))))
	}
	// A dead job claimed again (redriven) is no longer dead: its reason and dead-lettered message
	// go (its last error stays, to show what happened before). A new run starts without the last
	// run's progress or cancellation request.
	u.rm(AttrGSI1PK, AttrGSI1SK, AttrDeadMsg, AttrReason, AttrProgress, AttrProgressMsg, AttrProgressAt, AttrCancelAt, AttrCancelWhy)

	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(pk),
		ConditionExpression:                 aws.String(cond),
		UpdateExpression:                    aws.String(u.String()),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		if rec, err = RecordFromItem(out.Attributes); err != nil {
			return Record{}, false, false, fmt.Errorf("idempotency: claim %s: %w", pk, err)
		}
		return rec, true, true, nil
	}
	return s.refusal(ctx, "claim", pk, err)
}

// replaceExpired writes a fresh claim over old, an expired record, if old is still what is
// stored (exp, upd and tok unchanged). It reports false when the record changed.
func (s *DynamoDBStore) replaceExpired(ctx context.Context, req *ClaimRequest, pk string, old *Record) (Record, bool, error) {
	rec := freshRecord(req)
	e := newExpr()
	conds := []string{"attribute_exists(" + e.n(AttrPK) + ")"}
	same := func(name, placeholder string, av types.AttributeValue, present bool) {
		if present {
			conds = append(conds, e.n(name)+" = "+e.v(placeholder, av))
		} else {
			conds = append(conds, "attribute_not_exists("+e.n(name)+")")
		}
	}
	same(AttrExpires, ":oldExp", avN(old.ExpiresAt.Unix()), !old.ExpiresAt.IsZero())
	same(AttrUpdated, ":oldUpd", avN(unixMs(old.UpdatedAt)), !old.UpdatedAt.IsZero())
	same(AttrToken, ":oldTok", avS(old.Token), old.Token != "")
	_, err := s.putItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      s.layout.Item(rec, s.shards),
		ConditionExpression:       aws.String(strings.Join(conds, " AND ")),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.valuesOrNil(),
	})
	if err == nil {
		return rec, true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return Record{}, false, nil
	}
	return Record{}, false, fmt.Errorf("idempotency: claim %s (replacing an expired record): %w", pk, err)
}

// Finish implements Store: one UpdateItem conditioned on the claim's token.
func (s *DynamoDBStore) Finish(ctx context.Context, f Finish) error {
	if err := validateFinish(&f); err != nil {
		return err
	}
	pk, cond, u := s.finishWrite(&f)
	err := s.conditionalUpdate(ctx, "finish", pk, cond, u)
	if !errors.Is(err, ErrLeaseLost) {
		return err
	}
	// Refused: either the claim is gone, or an SDK retry of this very write (whose first response
	// was lost) found it already done, or (a failure) the record carries a cancellation request.
	// Tell them apart by reading the record.
	rec, gerr := s.getPK(ctx, pk)
	switch {
	case gerr != nil:
	case rec.State == f.State && rec.Token == "" && rec.UpdatedAt.Equal(msTime(f.Now)):
		return nil
	case f.cancelsOnRequest() && rec.State == StateRunning && rec.Token == f.Token && !rec.CancelRequestedAt.IsZero():
		f.State, f.Reason, f.Continue, f.RunAt = StateCancelled, jobs.ReasonCancelled, false, time.Time{}
		if err := s.Finish(ctx, f); err != nil {
			return err
		}
		return ErrRecordedCancelled
	}
	return err
}

// finishWrite returns the finishing write of a valid Finish: its item, its condition (the claim's
// token, still running) and its update.
func (s *DynamoDBStore) finishWrite(f *Finish) (pk, cond string, u *update) {
	pk = s.layout.ItemKey(f.Kind, f.Key, f.JobID)
	e := newExpr()
	cond = e.n(AttrToken) + " = " + e.v(":tok", avS(f.Token)) + " AND " +
		e.n(AttrState) + " = " + e.v(":running", avS(string(StateRunning)))
	if f.cancelsOnRequest() {
		// A cancellation requested while the job ran turns its failure (or continuation) into a
		// cancellation (below), never into a retry.
		cond += " AND attribute_not_exists(" + e.n(AttrCancelAt) + ")"
	}
	nowMs := e.v(":now", avN(unixMs(f.Now)))
	u = &update{e: e}
	u.setTo(AttrState, e.v(":st", avS(string(f.State))))
	u.setTo(AttrUpdated, nowMs)
	if f.ExpiresAt.IsZero() {
		u.rm(AttrExpires)
	} else {
		u.setTo(AttrExpires, e.v(":exp", avN(expSeconds(f.ExpiresAt))))
	}
	if f.Error != "" {
		u.setTo(AttrError, e.v(":err", avS(TruncateError(f.Error))))
	}
	if f.Reason != "" {
		u.setTo(AttrReason, e.v(":reason", avS(f.Reason)))
	}
	if f.State == StateSucceeded && f.Result != "" {
		u.setTo(AttrResult, e.v(":result", avS(f.Result)))
	}
	if f.State == StateDead && f.MessageID != "" {
		u.setTo(AttrDeadMsg, e.v(":deadmsg", avS(f.MessageID)))
	}
	if f.Progress != nil {
		setProgress(u, normalizeProgress(*f.Progress, f.Now))
	}
	if f.NotRun || f.Continue {
		// The claim counted a run that did not happen (or a run that was not an attempt: a
		// continuation): take it back in this same write (the token condition holds only on the
		// claim's record, whose runs are ≥ 1).
		u.setTo(AttrRuns, e.n(AttrRuns)+" - "+e.v(":one", avN(1)))
	}
	if f.Continue {
		u.setTo(AttrContinuations, "if_not_exists("+e.n(AttrContinuations)+", "+e.v(":zero", avN(0))+") + "+e.v(":one", avN(1)))
		if !f.RunAt.IsZero() {
			u.setTo(AttrRunAt, e.v(":runat", avN(unixMs(f.RunAt))))
		}
	}
	if rt := f.RunTime.Milliseconds(); rt > 0 {
		u.setTo(AttrRunTime, "if_not_exists("+e.n(AttrRunTime)+", "+e.v(":zero", avN(0))+") + "+e.v(":runms", avN(rt)))
	}
	if f.ClearCursor {
		u.rm(AttrCursor, AttrCursorPointer)
	}
	if StatusIndexed(f.State) {
		u.setTo(AttrGSI1PK, e.v(":gsi1pk", avS(StatusPartition(f.State, pk, s.shards))))
		u.setTo(AttrGSI1SK, nowMs)
	}
	// Otherwise there is nothing to remove from by_status: a running record never is in it (every
	// claim writes it without the index keys, or removes them).
	u.rm(AttrLease, AttrToken)
	return pk, cond, u
}

// Extra is what a caller adds to one of the store's writes that it runs inside a DynamoDB
// transaction of its own ([DynamoDBStore.FinishAction], [DynamoDBStore.MarkDeadAction]): a
// condition ANDed to the write's own, and assignments added to its SET clause, with their
// placeholders. Placeholders must start with "#x_" (names) and ":x_" (values), which the
// store's own never do, and none may be a prefix of another.
type Extra struct {
	// Condition is ANDed to the write's condition ("" adds none).
	Condition string
	// Set are assignments ("#x_a = :x_b") added to the write's SET clause.
	Set []string
	// Names and Values are the placeholders Condition and Set use.
	Names  map[string]string
	Values map[string]types.AttributeValue
}

// ErrExtra is wrapped by the error of an Extra whose placeholders do not start with "#x_" or
// ":x_".
var ErrExtra = errors.New("idempotency: Extra placeholders must start with #x_ or :x_")

// apply adds x to a write's condition and update.
func (x *Extra) apply(cond string, u *update) (string, error) {
	for name, v := range x.Names {
		if !strings.HasPrefix(name, "#x_") {
			return "", fmt.Errorf("%w: name placeholder %q", ErrExtra, name)
		}
		u.e.names[name] = v
	}
	for name, v := range x.Values {
		if !strings.HasPrefix(name, ":x_") {
			return "", fmt.Errorf("%w: value placeholder %q", ErrExtra, name)
		}
		u.e.values[name] = v
	}
	u.set = append(u.set, x.Set...)
	if x.Condition != "" {
		if cond == "" {
			return x.Condition, nil
		}
		cond = "(" + cond + ") AND (" + x.Condition + ")"
	}
	return cond, nil
}

// action returns an update as a transaction action on the item pk, with ALL_OLD on a refused
// condition (DynamoDB returns the item in the cancellation reason).
func (s *DynamoDBStore) action(pk, cond string, u *update) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(pk),
		ConditionExpression:                 aws.String(cond),
		UpdateExpression:                    aws.String(u.String()),
		ExpressionAttributeNames:            u.e.names,
		ExpressionAttributeValues:           u.e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// FinishAction returns the write Finish makes for f (an UpdateItem conditioned on the claim's
// token) as an action of a DynamoDB transaction, with x added to it: for a caller that must commit
// other writes with the job's outcome, all or nothing (pkg/batch: a batch's counters and its
// callback). Nothing is written. The caller runs the transaction and reads a refusal itself: a
// refused condition of this action means that the claim is no longer held (ErrLeaseLost), or
// that x's condition did not hold. Jobs finished with Finish keep its single UpdateItem.
func (s *DynamoDBStore) FinishAction(f Finish, x Extra) (types.TransactWriteItem, error) {
	if err := validateFinish(&f); err != nil {
		return types.TransactWriteItem{}, err
	}
	pk, cond, u := s.finishWrite(&f)
	cond, err := x.apply(cond, u)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return s.action(pk, cond, u), nil
}

// Renew implements Store: Touch with the lease alone.
func (s *DynamoDBStore) Renew(ctx context.Context, r Renewal) error {
	if err := validateRenew(&r); err != nil {
		return err
	}
	_, err := s.Touch(ctx, Touch{Kind: r.Kind, Key: r.Key, JobID: r.JobID, Token: r.Token, LeaseUntil: r.LeaseUntil})
	return err
}

// Touch implements Store: one UpdateItem conditioned on the claim's token (and the record
// running; with a cursor, on its number being above the record's), returning the item after the
// write (ReturnValues ALL_NEW). It costs the write units of the item's size (1 per KB, the larger
// of before and after): 1 for a record without a long last error or a large cursor. A refused
// write with a cursor is explained by the item that refused it (ALL_OLD, or a strongly consistent
// read where the backend does not return it): ErrStaleCursor when the claim holds but a newer
// cursor is saved, ErrLeaseLost otherwise.
func (s *DynamoDBStore) Touch(ctx context.Context, t Touch) (Record, error) {
	if err := validateTouch(&t); err != nil {
		return Record{}, err
	}
	pk := s.layout.ItemKey(t.Kind, t.Key, t.JobID)
	e := newExpr()
	cond := e.n(AttrToken) + " = " + e.v(":tok", avS(t.Token)) + " AND " +
		e.n(AttrState) + " = " + e.v(":running", avS(string(StateRunning)))
	u := &update{e: e}
	if !t.LeaseUntil.IsZero() {
		u.setTo(AttrLease, e.v(":lease", avN(unixMs(t.LeaseUntil))))
	}
	if t.Progress != nil {
		setProgress(u, normalizeProgress(*t.Progress, t.Now))
	}
	var cur Cursor
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key:       keyOf(pk),
	}
	if t.Cursor != nil {
		cur = normalizeCursor(*t.Cursor, t.Now)
		seq := e.v(":cseq", avN(cur.Seq))
		cond += " AND (attribute_not_exists(" + e.n(AttrCursorSeq) + ") OR " + e.n(AttrCursorSeq) + " < " + seq + ")"
		u.setTo(AttrCursorSeq, seq)
		u.setTo(AttrCursorAt, e.v(":cat", avN(unixMs(cur.At))))
		u.setTo(AttrCursorBytes, e.v(":clen", avN(int64(cur.Bytes))))
		if cur.Value != "" {
			u.setTo(AttrCursor, e.v(":cval", avS(cur.Value)))
			u.rm(AttrCursorPointer)
		} else {
			u.setTo(AttrCursorPointer, e.v(":cptr", avS(cur.Pointer)))
			u.rm(AttrCursor)
		}
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	in.ConditionExpression = aws.String(cond)
	in.UpdateExpression = aws.String(u.String())
	in.ExpressionAttributeNames = e.names
	in.ExpressionAttributeValues = e.valuesOrNil()
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.updateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf) && t.Cursor == nil:
		return Record{}, ErrLeaseLost
	case errors.As(err, &ccf):
		rec, _, found, rerr := s.refusal(ctx, "touch", pk, err)
		switch {
		case rerr != nil:
			return Record{}, rerr
		case !found || rec.State != StateRunning || rec.Token != t.Token:
			return Record{}, ErrLeaseLost
		case rec.Cursor == cur:
			return rec, nil // this very write, sent again by the SDK after its answer was lost
		}
		return Record{}, ErrStaleCursor
	case err != nil:
		return Record{}, fmt.Errorf("idempotency: touch %s: %w", pk, err)
	}
	rec, err := RecordFromItem(out.Attributes)
	if err != nil {
		return Record{}, fmt.Errorf("idempotency: touch %s: %w", pk, err)
	}
	return rec, nil
}

// setProgress adds the SET (and REMOVE, for an empty message) actions of progress p (normalized).
func setProgress(u *update, p Progress) {
	u.setTo(AttrProgress, u.e.v(":pfrac", avF(p.Fraction)))
	u.setTo(AttrProgressAt, u.e.v(":pat", avN(unixMs(p.At))))
	if p.Message != "" {
		u.setTo(AttrProgressMsg, u.e.v(":pmsg", avS(p.Message)))
	} else {
		u.rm(AttrProgressMsg)
	}
}

// conditionalUpdate runs an UpdateItem of the item pk whose failed condition means the claim is
// lost.
func (s *DynamoDBStore) conditionalUpdate(ctx context.Context, op, pk, cond string, u *update) error {
	_, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyOf(pk),
		ConditionExpression:       aws.String(cond),
		UpdateExpression:          aws.String(u.String()),
		ExpressionAttributeNames:  u.e.names,
		ExpressionAttributeValues: u.e.valuesOrNil(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return ErrLeaseLost
	}
	return fmt.Errorf("idempotency: %s %s: %w", op, pk, err)
}

// MarkDead implements Store: one UpdateItem conditioned on there being no record, or on the
// record being live, the job's (job id or payload hash) and waiting for a run; where there is no
// record the update creates the dead one. A refused write is billed too (1 write unit when there
// is no item). A record refusing it because it has expired (DynamoDB's TTL has not deleted it
// yet) is replaced by a fresh dead record with a PutItem conditioned on it being unchanged; the
// refusing record comes with the refusal (ALL_OLD) or, on backends that do not return it, from a
// strongly consistent read.
func (s *DynamoDBStore) MarkDead(ctx context.Context, d DeadMark) (bool, error) {
	if err := validateDeadMark(&d); err != nil {
		return false, err
	}
	if err := s.layout.checkSize(d.Kind, d.Key, d.JobID); err != nil {
		return false, err
	}
	pk, cond, u := s.markDeadWrite(&d)
	e := u.e
	_, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(pk),
		ConditionExpression:                 aws.String(cond),
		UpdateExpression:                    aws.String(u.String()),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return true, nil
	}
	rec, _, found, err := s.refusal(ctx, "mark dead", pk, err)
	switch {
	case err != nil:
		return false, err
	case !found || !rec.Expired(d.Now):
		return false, nil // another job's record, or one that does not wait for a run
	}
	return s.replaceExpiredDead(ctx, &d, pk, &rec)
}

// markDeadWrite returns the write MarkDead makes for a valid DeadMark: its item, its condition
// (no record, or a live record of the job waiting for a run) and its update.
func (s *DynamoDBStore) markDeadWrite(d *DeadMark) (pk, cond string, u *update) {
	pk = s.layout.ItemKey(d.Kind, d.Key, d.JobID)
	idKeyed := s.layout.IDKeyed(d.Key, d.JobID)
	e := newExpr()
	nowMs := e.v(":now", avN(unixMs(d.Now)))
	var ours []string
	switch {
	case idKeyed:
		// The item is named by the job's id: it is the job's.
	case d.JobID != "":
		ours = append(ours, e.n(AttrJobID)+" = "+e.v(":job", avS(d.JobID)))
		if d.PayloadHash != "" {
			ours = append(ours, e.n(AttrHash)+" = "+e.v(":hash", avS(d.PayloadHash)))
		}
	default:
		ours = append(ours, e.n(AttrHash)+" = "+e.v(":hash", avS(d.PayloadHash)))
	}
	waiting := "(attribute_not_exists(" + e.n(AttrExpires) + ") OR " + e.n(AttrExpires) + " > " + e.v(":secs", avN(d.Now.Unix())) + ")" +
		" AND (" + e.n(AttrState) + " IN (" + e.v(":queued", avS(string(StateQueued))) + ", " +
		e.v(":scheduled", avS(string(StateScheduled))) + ", " + e.v(":retrying", avS(string(StateRetrying))) + ") OR (" +
		e.n(AttrState) + " = " + e.v(":running", avS(string(StateRunning))) + " AND " + e.n(AttrLease) + " <= " + nowMs + "))"
	if len(ours) > 0 {
		waiting += " AND (" + strings.Join(ours, " OR ") + ")"
	}
	cond = "attribute_not_exists(" + e.n(AttrPK) + ") OR (" + waiting + ")"
	u = &update{e: e}
	u.setTo(AttrState, e.v(":stdead", avS(string(StateDead))))
	u.setTo(AttrReason, e.v(":reason", avS(d.Reason)))
	// What a new record needs, which an existing record of the job already has: kept where set.
	keep := func(name, placeholder string, av types.AttributeValue) {
		u.setTo(name, "if_not_exists("+e.n(name)+", "+e.v(placeholder, av)+")")
	}
	if d.Kind != "" {
		keep(AttrKind, ":kind", avS(d.Kind))
	}
	if !idKeyed || pk != IDKeyPrefix+d.Key {
		keep(AttrKey, ":key", avS(d.Key))
	}
	if !idKeyed && d.JobID != "" {
		keep(AttrJobID, ":job", avS(d.JobID))
	}
	if d.PayloadHash != "" {
		keep(AttrHash, ":hash", avS(d.PayloadHash))
	}
	keep(AttrRuns, ":zero", avN(0))
	if d.Error != "" {
		u.setTo(AttrError, e.v(":err", avS(TruncateError(d.Error))))
	}
	if d.MessageID != "" {
		u.setTo(AttrDeadMsg, e.v(":msgid", avS(d.MessageID)))
	} else {
		u.rm(AttrDeadMsg)
	}
	u.setTo(AttrUpdated, nowMs)
	if d.ExpiresAt.IsZero() {
		u.rm(AttrExpires)
	} else {
		u.setTo(AttrExpires, e.v(":exp", avN(expSeconds(d.ExpiresAt))))
	}
	u.setTo(AttrGSI1PK, e.v(":gsi1pk", avS(StatusPartition(StateDead, pk, s.shards))))
	u.setTo(AttrGSI1SK, nowMs)
	u.rm(AttrLease, AttrToken)
	return pk, cond, u
}

// MarkDeadAction returns the write MarkDead makes for d (an UpdateItem conditioned on there being
// no record of the job, or a live one of the job waiting for a run) as an action of a DynamoDB
// transaction, with x added to it: for a caller that must commit other writes with the dead mark
// (pkg/batch). Nothing is written. Unlike MarkDead, the action does not replace an expired record
// (its condition refuses one); the caller reads a refusal itself and may fall back to MarkDead.
func (s *DynamoDBStore) MarkDeadAction(d DeadMark, x Extra) (types.TransactWriteItem, error) {
	if err := validateDeadMark(&d); err != nil {
		return types.TransactWriteItem{}, err
	}
	if err := s.layout.checkSize(d.Kind, d.Key, d.JobID); err != nil {
		return types.TransactWriteItem{}, err
	}
	pk, cond, u := s.markDeadWrite(&d)
	cond, err := x.apply(cond, u)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return s.action(pk, cond, u), nil
}

// replaceExpiredDead writes a fresh dead record over old, an expired record, if old is still what
// is stored (exp, upd and tok unchanged). It reports false when the record changed meanwhile.
func (s *DynamoDBStore) replaceExpiredDead(ctx context.Context, d *DeadMark, pk string, old *Record) (bool, error) {
	e := newExpr()
	conds := []string{"attribute_exists(" + e.n(AttrPK) + ")"}
	same := func(name, placeholder string, av types.AttributeValue, present bool) {
		if present {
			conds = append(conds, e.n(name)+" = "+e.v(placeholder, av))
		} else {
			conds = append(conds, "attribute_not_exists("+e.n(name)+")")
		}
	}
	same(AttrExpires, ":oldExp", avN(old.ExpiresAt.Unix()), !old.ExpiresAt.IsZero())
	same(AttrUpdated, ":oldUpd", avN(unixMs(old.UpdatedAt)), !old.UpdatedAt.IsZero())
	same(AttrToken, ":oldTok", avS(old.Token), old.Token != "")
	_, err := s.putItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      s.layout.Item(deadRecord(d), s.shards),
		ConditionExpression:       aws.String(strings.Join(conds, " AND ")),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.valuesOrNil(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil // written meanwhile: that write is newer
	}
	return false, fmt.Errorf("idempotency: mark dead %s (replacing an expired record): %w", pk, err)
}

// Get implements Store with strongly consistent GetItems: of ItemKey(kind, key) and, since key
// may be the id of a job whose record is kept under its id, of IDItemKey(key) (taken only when its
// kind is kind); when both exist, the more recently updated. Expired records are returned too:
// callers check Record.Expired.
func (s *DynamoDBStore) Get(ctx context.Context, kind, key string) (Record, error) {
	rec, err := s.getPK(ctx, ItemKey(kind, key))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Record{}, err
	}
	byID, idErr := s.getPK(ctx, IDItemKey(key))
	switch {
	case idErr != nil && !errors.Is(idErr, ErrNotFound):
		return Record{}, idErr
	case idErr == nil && byID.Kind == kind && byID.Key == key && (err != nil || byID.UpdatedAt.After(rec.UpdatedAt)):
		return byID, nil
	}
	return rec, err
}

// ReadClaim implements ClaimReader: one eventually consistent GetItem of the claim's item (half
// a read unit per 4 KB; it may miss a write of the last second or so).
func (s *DynamoDBStore) ReadClaim(ctx context.Context, kind, key, jobID string) (Record, error) {
	pk := s.layout.ItemKey(kind, key, jobID)
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: keyOf(pk)}, keepConnection)
	if err != nil {
		return Record{}, fmt.Errorf("idempotency: read %s: %w", pk, err)
	}
	if len(out.Item) == 0 {
		return Record{}, ErrNotFound
	}
	rec, err := RecordFromItem(out.Item)
	if err != nil {
		return Record{}, fmt.Errorf("idempotency: read %s: %w", pk, err)
	}
	return rec, nil
}

// getPK reads the item pk with a strongly consistent GetItem, or returns ErrNotFound.
func (s *DynamoDBStore) getPK(ctx context.Context, pk string) (Record, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyOf(pk),
		ConsistentRead: aws.Bool(true),
	}, keepConnection)
	if err != nil {
		return Record{}, fmt.Errorf("idempotency: get %s: %w", pk, err)
	}
	if len(out.Item) == 0 {
		return Record{}, ErrNotFound
	}
	rec, err := RecordFromItem(out.Item)
	if err != nil {
		return Record{}, fmt.Errorf("idempotency: get %s: %w", pk, err)
	}
	return rec, nil
}

// Put writes r as it is with one unconditional PutItem (times at the store's precision, the
// error truncated, the by-status index attributes set for its state), replacing any record of
// its key. It is how a producer records a queued or scheduled job, and how tests seed records
// (idempotencytest.Options.Seed).
func (s *DynamoDBStore) Put(ctx context.Context, r Record) error {
	if r.Kind == "" || r.Key == "" || !validState(r.State) {
		return fmt.Errorf("%w: put of a record without a Kind, Key or valid State (%q)", errInvalid, r.State)
	}
	_, err := s.putItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item:      s.layout.Item(r, s.shards),
	})
	if err != nil {
		return fmt.Errorf("idempotency: put %s: %w", s.layout.ItemKey(r.Kind, r.Key, r.JobID), err)
	}
	return nil
}

// Table returns the store's table name.
func (s *DynamoDBStore) Table() string { return s.table }

// Shards returns the number of by-status index partitions per state.
func (s *DynamoDBStore) Shards() int { return s.shards }

// Layout returns the layout the store writes.
func (s *DynamoDBStore) Layout() Layout { return s.layout }

// putItem runs a PutItem, sent again while a transaction conflict refuses it (ddbretry).
func (s *DynamoDBStore) putItem(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
	return ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.PutItemOutput, error) {
		return s.client.PutItem(ctx, in, keepConnection)
	})
}

// updateItem runs an UpdateItem, sent again while a transaction conflict refuses it (ddbretry).
func (s *DynamoDBStore) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return s.client.UpdateItem(ctx, in, keepConnection)
	})
}

// keepConnection is passed with every DynamoDB call: without it the SDK may lose a response
// under a race in its HTTP layer and repeat the write (see internal/sdkhttp).
func keepConnection(o *dynamodb.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient)
	}
}
