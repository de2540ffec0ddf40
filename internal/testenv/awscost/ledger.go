package awscost

import (
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Ledger adds up the write units of a sequence of DynamoDB writes. It keeps the last image of
// every item it was told about, so that each write is billed on the item before and after it
// (Schema.WriteUnits). Items it was never told about count as absent. It is safe for concurrent
// use; writes to one item must be recorded in their order.
type Ledger struct {
	mu      sync.Mutex
	schemas map[string]Schema
	images  map[string]map[string]map[string]types.AttributeValue // table → key → item
	table   int
	indexes map[string]int
	writes  int
}

// NewLedger returns a ledger for the tables in schemas (by name).
func NewLedger(schemas map[string]Schema) *Ledger {
	return &Ledger{schemas: schemas, images: map[string]map[string]map[string]types.AttributeValue{}, indexes: map[string]int{}}
}

// AddTable adds a table's schema.
func (l *Ledger) AddTable(name string, s Schema) {
	l.mu.Lock()
	l.schemas[name] = s
	l.mu.Unlock()
}

// Schema returns the schema of table, and whether the ledger knows it.
func (l *Ledger) Schema(table string) (Schema, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.schemas[table]
	return s, ok
}

// Key returns the key of w's item: its Key, or the key attributes of its Item.
func (s Schema) Key(w Write) map[string]types.AttributeValue {
	if w.Key != nil {
		return w.Key
	}
	k := map[string]types.AttributeValue{}
	for _, name := range s.Keys {
		if v, ok := w.Item[name]; ok {
			k[name] = v
		}
	}
	return k
}

// Record bills a write to the item with key in table: after is the item once the write is done
// (nil: none), conditionFailed a refused conditional write. It returns the write's cost.
func (l *Ledger) Record(table string, key, after map[string]types.AttributeValue, conditionFailed bool) (Cost, error) {
	return l.record(table, key, after, conditionFailed, false)
}

// RecordTransactional bills a write of a TransactWriteItems as Record does, with the table's
// units doubled (DynamoDB prepares and commits each item of a transaction: 2 write units per KB).
// The indexes' units are not doubled: DynamoDB propagates a transaction's changes to its global
// secondary indexes after the commit, as it does for any write. A cancelled transaction
// (conditionFailed) is billed as a refused conditional write of each item, once.
func (l *Ledger) RecordTransactional(table string, key, after map[string]types.AttributeValue, conditionFailed bool) (Cost, error) {
	return l.record(table, key, after, conditionFailed, true)
}

func (l *Ledger) record(table string, key, after map[string]types.AttributeValue, conditionFailed, tx bool) (Cost, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.schemas[table]
	if !ok {
		return Cost{}, fmt.Errorf("awscost: table %q has no schema in the ledger", table)
	}
	ks, err := keyString(s, key)
	if err != nil {
		return Cost{}, err
	}
	items := l.images[table]
	if items == nil {
		items = map[string]map[string]types.AttributeValue{}
		l.images[table] = items
	}
	before := items[ks]
	if conditionFailed {
		after = before
	}
	c := s.WriteUnits(before, after, conditionFailed)
	if tx && !conditionFailed {
		c.Table *= 2
	}
	if after == nil {
		delete(items, ks)
	} else {
		items[ks] = after
	}
	l.writes++
	l.table += c.Table
	for name, u := range c.Indexes {
		l.indexes[name] += u
	}
	return c, nil
}

// Totals returns the write units billed so far: on the tables, and per index name.
func (l *Ledger) Totals() (table int, indexes map[string]int, writes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ix := make(map[string]int, len(l.indexes))
	for k, v := range l.indexes {
		ix[k] = v
	}
	return l.table, ix, l.writes
}

// Item returns a copy of the ledger's image of the item with key in table: the item as the
// last write recorded to it left it, and true; nil and false when the ledger holds none (never
// written, or deleted). The attribute values are the recorded ones, shared: do not change them.
//
// Wait on it, not on reads of the table, for a write to be billed: a Counter reports a write
// once DynamoDB has applied it, so a read can see a write the ledger has not recorded yet.
func (l *Ledger) Item(table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.schemas[table]
	if !ok {
		return nil, false, fmt.Errorf("awscost: table %q has no schema in the ledger", table)
	}
	ks, err := keyString(s, key)
	if err != nil {
		return nil, false, err
	}
	img, ok := l.images[table][ks]
	if !ok {
		return nil, false, nil
	}
	return maps.Clone(img), true, nil
}

// Items returns copies of the ledger's images of every item of table it holds (see Item), in no
// particular order.
func (l *Ledger) Items(table string) []map[string]types.AttributeValue {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]map[string]types.AttributeValue, 0, len(l.images[table]))
	for _, img := range l.images[table] {
		out = append(out, maps.Clone(img))
	}
	return out
}

func keyString(s Schema, key map[string]types.AttributeValue) (string, error) {
	var b strings.Builder
	for _, name := range s.Keys {
		switch v := key[name].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("S:" + v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString("N:" + v.Value)
		case *types.AttributeValueMemberB:
			b.WriteString(fmt.Sprintf("B:%x", v.Value))
		default:
			return "", fmt.Errorf("awscost: key attribute %s is %T", name, key[name])
		}
		b.WriteByte(0)
	}
	return b.String(), nil
}
