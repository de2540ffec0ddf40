package awscost

import (
	"github.com/sqsworker/sqsworker/internal/ddbsize"
	"maps"
	"reflect"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Schema is what the write cost of a table's items depends on: its key attributes and its
// global secondary indexes.
type Schema struct {
	// Keys are the table's key attributes (partition key, then sort key if any).
	Keys []string
	// Indexes are the table's global secondary indexes.
	Indexes []Index
}

// Index is a global secondary index.
type Index struct {
	Name string
	// Keys are the index's key attributes.
	Keys []string
	// Projection is KEYS_ONLY, INCLUDE or ALL.
	Projection types.ProjectionType
	// Include lists the non-key attributes an INCLUDE projection copies.
	Include []string
}

// SchemaFromCreateTable returns the schema of the table in.
func SchemaFromCreateTable(in *dynamodb.CreateTableInput) Schema {
	keys := func(ks []types.KeySchemaElement) []string {
		var out []string
		for _, k := range ks {
			out = append(out, aws.ToString(k.AttributeName))
		}
		return out
	}
	s := Schema{Keys: keys(in.KeySchema)}
	for _, g := range in.GlobalSecondaryIndexes {
		ix := Index{Name: aws.ToString(g.IndexName), Keys: keys(g.KeySchema), Projection: types.ProjectionTypeAll}
		if g.Projection != nil && g.Projection.ProjectionType != "" {
			ix.Projection = g.Projection.ProjectionType
			ix.Include = g.Projection.NonKeyAttributes
		}
		s.Indexes = append(s.Indexes, ix)
	}
	return s
}

// Cost is the write request units of one write: on the table, and per index.
type Cost struct {
	Table   int
	Indexes map[string]int
}

// Total returns the write units of the table and its indexes together.
func (c Cost) Total() int {
	n := c.Table
	for _, u := range c.Indexes {
		n += u
	}
	return n
}

// WriteUnits returns what a write that turned item old into item new costs (nil: no item), by
// DynamoDB's rules:
//
//   - the table: the larger of the two items, one unit per KB started (a write that leaves no
//     item, a delete, is billed on the old item);
//   - a refused conditional write (failed): 1 unit when there is no item, otherwise by the
//     item's size; no index is written;
//   - each index: an entry is written when the item enters the index (all its index key
//     attributes appear), deleted when it leaves, deleted and written again (2 writes) when an
//     index key value changes, and written when a projected attribute changes while it stays;
//     each entry write costs one unit per KB started of the entry (the table's keys, the index's
//     keys and the projected attributes).
func (s Schema) WriteUnits(old, new map[string]types.AttributeValue, failed bool) Cost {
	if failed {
		return Cost{Table: ddbsize.Units(ddbsize.ItemSize(old), ddbsize.WriteUnitBytes)}
	}
	c := Cost{Table: ddbsize.Units(max(ddbsize.ItemSize(old), ddbsize.ItemSize(new)), ddbsize.WriteUnitBytes)}
	for _, ix := range s.Indexes {
		oldE, newE := s.entry(ix, old), s.entry(ix, new)
		u := 0
		switch {
		case oldE == nil && newE == nil:
		case oldE == nil:
			u = ddbsize.Units(ddbsize.ItemSize(newE), ddbsize.WriteUnitBytes)
		case newE == nil:
			u = ddbsize.Units(ddbsize.ItemSize(oldE), ddbsize.WriteUnitBytes)
		case !sameAttrs(oldE, newE, ix.Keys):
			u = ddbsize.Units(ddbsize.ItemSize(oldE), ddbsize.WriteUnitBytes) + ddbsize.Units(ddbsize.ItemSize(newE), ddbsize.WriteUnitBytes)
		case !reflect.DeepEqual(oldE, newE):
			u = ddbsize.Units(ddbsize.ItemSize(newE), ddbsize.WriteUnitBytes)
		}
		if u > 0 {
			if c.Indexes == nil {
				c.Indexes = map[string]int{}
			}
			c.Indexes[ix.Name] += u
		}
	}
	return c
}

// entry returns item's entry in index ix, or nil when the item is not in it (an index key
// attribute is missing: indexes are sparse).
func (s Schema) entry(ix Index, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	e := map[string]types.AttributeValue{}
	for _, k := range ix.Keys {
		v, ok := item[k]
		if !ok {
			return nil
		}
		e[k] = v
	}
	for _, k := range s.Keys {
		if v, ok := item[k]; ok {
			e[k] = v
		}
	}
	switch ix.Projection {
	case types.ProjectionTypeAll:
		maps.Copy(e, item)
	case types.ProjectionTypeInclude:
		for _, a := range ix.Include {
			if v, ok := item[a]; ok {
				e[a] = v
			}
		}
	}
	return e
}

func sameAttrs(a, b map[string]types.AttributeValue, names []string) bool {
	return !slices.ContainsFunc(names, func(n string) bool { return !reflect.DeepEqual(a[n], b[n]) })
}
