package pgoutbox

import (
	"strconv"
	"strings"
)

// columns are what every read returns, in scanEntry's order.
const columns = `seq, id, queue_url, kind, job_key, group_id, dedup_id, body, attributes, run_at, state,
	created_at, available_at, attempts, locked_by, locked_until, last_error`

// The statements, with {T} for the table. Every parameter is text, an integer or a timestamp
// (arrays travel as one JSON text), so that any database/sql driver can run them.
const (
	// The insert: $1 the rows as a JSON array, $2 the channel (with notify). {INS} is
	// insertRowsSQL, with RETURNING 1 when the channel is notified.
	insertSQL = `WITH {LOCKS}ins AS (
{INS}
	RETURNING 1
)
SELECT pg_notify($2, '') FROM (SELECT 1 FROM ins LIMIT 1) AS n`
	insertNoNotifySQL = `{WITHLOCKS}{INS}`

	// The rows, in the batch's order. A job id already in the table (an explicit
	// producer.WithID enqueued again while its row is pending or dead), or twice in the batch,
	// is the same job: its first row stays, and the caller's transaction is not aborted by a
	// unique violation. {FROM} is "locks, " when the batch has FIFO rows: the
	// insert then reads its rows only after fifoLocksSQL took every lock, so every row's seq
	// is drawn under its group's lock.
	insertRowsSQL = `INSERT INTO {T} (id, queue_url, kind, job_key, group_id, dedup_id, body, attributes, run_at, created_at, available_at)
	SELECT x.id, x.queue_url, x.kind, x.job_key, x.group_id, x.dedup_id, x.body, x.attributes, x.run_at,
		coalesce(x.created_at, now()), coalesce(x.available_at, x.created_at, now())
	FROM {FROM}ROWS FROM (json_to_recordset($1::json) AS (id text, queue_url text, kind text, job_key text, group_id text,
		dedup_id text, body text, attributes jsonb, run_at timestamptz, created_at timestamptz, available_at timestamptz))
		WITH ORDINALITY AS x(id, queue_url, kind, job_key, group_id, dedup_id, body, attributes, run_at, created_at, available_at, ord)
	ORDER BY x.ord
	ON CONFLICT (id) DO NOTHING`

	// The FIFO groups' writer locks: pg_advisory_xact_lock({SPACE}, hashtext(group_key)) for
	// each FIFO group of the batch (the key is the group_key column's expression), in the
	// order of the lock keys, so that two batches never wait for each other in a cycle. The
	// locks are held until the caller's transaction ends: a second transaction writing to one
	// of the groups waits for it here, before it draws a seq, so a group's seq order is its
	// commit order; and a claim's try-lock on the same key skips the group meanwhile. The
	// outer count(*) returns one row only after every lock is taken (volatile functions in a
	// select list run after its ORDER BY).
	fifoLocksSQL = `locks AS MATERIALIZED (
	SELECT count(*) AS n FROM (
		SELECT pg_advisory_xact_lock({SPACE}, k.h) FROM (
			SELECT DISTINCT hashtext(g.queue_url || ' ' || coalesce(g.group_id, '')) AS h
			FROM json_to_recordset($1::json) AS g(queue_url text, group_id text)
			WHERE right(g.queue_url, 5) = '.fifo'
		) AS k
		ORDER BY k.h
	) AS l
)`

	// The claim, in one statement (so in one short transaction). $1 now, $2 max, $3 owner,
	// $4 until, $5 the table's advisory-lock space; IDS is replaced by a filter on the ids of
	// $6 for the fast path, or by nothing.
	//
	// Standard rows: the classic FOR UPDATE SKIP LOCKED, so that concurrent claims take
	// different rows. FIFO rows (group_key set) are claimed by this rule: a row is claimed only
	// if every earlier pending row of its group, in this statement's snapshot, is locked by
	// this statement and still due when locked (FOR UPDATE rechecks a row changed since the
	// snapshot). Every way another relay can hold or change an earlier row — its claim is in
	// progress (the row is locked: skipped), was committed after the snapshot (the recheck
	// fails), or was committed before it (the row is not due) — leaves that row out of
	// fifo_locked, and fifo then drops the rest of the group. So no two relays ever hold rows
	// of one group at once, and a group's rows are claimed in order. The advisory try-lock per
	// group is not needed for that; it keeps concurrent claims from wasting their LIMIT on the
	// same groups (each relay takes groups no other claim is taking).
	claimSQL = `WITH std AS MATERIALIZED (
	SELECT seq FROM {T}
	WHERE state = 'pending' AND group_key IS NULL AND available_at <= $1 AND (locked_until IS NULL OR locked_until <= $1) IDS
	ORDER BY seq LIMIT $2
	FOR UPDATE SKIP LOCKED
), cand AS MATERIALIZED (
	SELECT o.seq, o.group_key FROM {T} o
	WHERE o.state = 'pending' AND o.group_key IS NOT NULL O_IDS
		AND CASE WHEN o.available_at <= $1 AND (o.locked_until IS NULL OR o.locked_until <= $1)
			AND NOT EXISTS (SELECT 1 FROM {T} e WHERE e.state = 'pending' AND e.group_key = o.group_key AND e.seq < o.seq
				AND (e.available_at > $1 OR e.locked_until > $1 E_IDS))
			THEN pg_try_advisory_xact_lock($5, hashtext(o.group_key)) ELSE false END
	ORDER BY o.seq LIMIT $2
), fifo_locked AS MATERIALIZED (
	SELECT seq FROM {T}
	WHERE seq IN (SELECT seq FROM cand) AND state = 'pending' AND available_at <= $1 AND (locked_until IS NULL OR locked_until <= $1)
	FOR UPDATE SKIP LOCKED
), fifo AS MATERIALIZED (
	SELECT c.seq FROM cand c
	WHERE c.seq IN (SELECT seq FROM fifo_locked)
		AND NOT EXISTS (SELECT 1 FROM {T} e WHERE e.state = 'pending' AND e.group_key = c.group_key AND e.seq < c.seq
			AND e.seq NOT IN (SELECT seq FROM fifo_locked))
), picked AS (
	SELECT seq FROM std UNION ALL SELECT seq FROM fifo ORDER BY seq LIMIT $2
)
UPDATE {T} o SET attempts = o.attempts + 1, locked_by = $3, locked_until = $4
FROM picked WHERE o.seq = picked.seq
RETURNING {COLUMNS}`

	// $1 owner, $2 the outcomes as a JSON array. Every write is guarded by the claim: the
	// owner and the attempts it claimed.
	completeSQL = `WITH x AS MATERIALIZED (
	SELECT * FROM json_to_recordset($2::json) AS x(id text, attempts integer, op text, error text, available_at timestamptz)
), sent AS (
	DELETE FROM {T} o USING x
	WHERE x.op = 'sent' AND o.id = x.id AND o.attempts = x.attempts AND o.locked_by = $1 AND o.state = 'pending'
)
UPDATE {T} o SET
	state = CASE WHEN x.op = 'dead' THEN 'dead' ELSE o.state END,
	attempts = CASE WHEN x.op = 'release' THEN o.attempts - 1 ELSE o.attempts END,
	available_at = CASE WHEN x.op = 'failed' OR (x.op = 'release' AND x.available_at IS NOT NULL) THEN x.available_at ELSE o.available_at END,
	last_error = CASE WHEN x.op IN ('failed', 'dead') THEN x.error ELSE o.last_error END,
	locked_by = NULL, locked_until = NULL
FROM x
WHERE x.op <> 'sent' AND o.id = x.id AND o.attempts = x.attempts AND o.locked_by = $1 AND o.state = 'pending'`
)

var prefixedColumns = func() string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = "o." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}()

func (o *Outbox) buildSQL() {
	t := func(s string) string {
		return strings.NewReplacer("{T}", o.table, "{COLUMNS}", prefixedColumns).Replace(s)
	}
	space := strconv.Itoa(int(o.lockSpace))
	locks := strings.ReplaceAll(fifoLocksSQL, "{SPACE}", space)
	for _, fifo := range []bool{false, true} {
		rows, with, withNotify := strings.ReplaceAll(insertRowsSQL, "{FROM}", ""), "", ""
		if fifo {
			rows = strings.ReplaceAll(insertRowsSQL, "{FROM}", "locks, ")
			with, withNotify = "WITH "+locks+"\n", locks+", "
		}
		q := strings.NewReplacer("{WITHLOCKS}", with, "{INS}", rows).Replace(insertNoNotifySQL)
		if o.notify {
			q = strings.NewReplacer("{LOCKS}", withNotify, "{INS}", rows).Replace(insertSQL)
		}
		o.insertSQL[boolIndex(fifo)] = t(q)
	}
	ids := strings.NewReplacer("O_IDS", "", "E_IDS", "", "IDS", "")
	o.claimSQL = t(ids.Replace(claimSQL))
	const in = "IN (SELECT json_array_elements_text($6::json))"
	fast := strings.NewReplacer("O_IDS", "AND o.id "+in, "E_IDS", "OR NOT e.id "+in, "IDS", "AND id "+in)
	o.claimIDsSQL = t(fast.Replace(claimSQL))
	o.completeSQL = t(completeSQL)
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}
