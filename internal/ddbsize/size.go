// Package ddbsize holds DynamoDB's published size rules: the size of an item, of an attribute
// value and of a number as DynamoDB bills and limits them, and rounding a size up to request
// units. The DynamoDB outbox checks its items against the 400 KB limit with it, and the cost
// ledger of the benchmarks (internal/testenv/awscost) bills write units with it. It imports
// nothing of this module.
package ddbsize

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize returns the size of an item as DynamoDB bills it: the sum, over its attributes, of
// the UTF-8 length of the attribute's name and the size of its value (see ValueSize).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + ValueSize(v)
	}
	return n
}

// ValueSize returns the size of an attribute value, by the rules of "DynamoDB item sizes and
// formats" (docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
//
//   - a string: its UTF-8 bytes; a binary: its raw bytes;
//   - a number: 1 byte per two significant digits, plus 1 (leading and trailing zeros trimmed;
//     AWS calls this approximate);
//   - a Boolean or null: 1 byte;
//   - a list or map: 3 bytes, plus for each element 1 byte and its size (a map element's size
//     includes its name);
//   - a set: the sum of its elements' sizes.
//
// A nil or unknown value counts 0.
func ValueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return NumberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += NumberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for name, e := range v.Value {
			n += 1 + len(name) + ValueSize(e)
		}
		return n
	}
	return 0
}

// NumberSize returns the size of a number in DynamoDB's wire form ("-12.50", "1E+3"): 1 byte per
// two significant digits (rounded up), plus 1. Zero counts as one digit.
func NumberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.Replace(s, ".", "", 1)
	digits = strings.TrimLeft(digits, "0")
	digits = strings.TrimRight(digits, "0")
	d := max(len(digits), 1)
	return (d+1)/2 + 1
}

// Units returns the billed units of size bytes in units of unit bytes: one per unit started,
// at least one (a write of up to 1 KB is 1 write unit; a write of 0 bytes still costs 1).
func Units(size, unit int) int {
	if size <= unit {
		return 1
	}
	return (size + unit - 1) / unit
}

// WriteUnitBytes is what one write request unit covers.
const WriteUnitBytes = 1024
