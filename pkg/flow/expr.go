package flow

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// expr collects the placeholders of one DynamoDB expression. Placeholders are numbered with a
// fixed width ("#n00", ":v00"), so that none is a prefix of another: some emulators substitute
// them as text, in any order.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
	byName map[string]string
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}, byName: map[string]string{}}
}

// n returns the placeholder of the attribute name.
func (e *expr) n(name string) string {
	if p, ok := e.byName[name]; ok {
		return p
	}
	p := fmt.Sprintf("#n%03d", len(e.names))
	e.names[p] = name
	e.byName[name] = p
	return p
}

// v binds a new placeholder to av and returns it.
func (e *expr) v(av types.AttributeValue) string {
	p := fmt.Sprintf(":v%03d", len(e.values))
	e.values[p] = av
	return p
}

func (e *expr) valuesOrNil() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

// update builds an update expression's SET, REMOVE and ADD clauses.
type update struct {
	set, remove, add []string
}

func (u *update) String() string {
	var b strings.Builder
	for _, c := range []struct {
		kw    string
		parts []string
	}{{"SET", u.set}, {"REMOVE", u.remove}, {"ADD", u.add}} {
		if len(c.parts) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.kw + " " + strings.Join(c.parts, ", "))
	}
	return b.String()
}

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func avN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func avNs(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }

// getS and getN read a string or a number attribute ("" and false when absent or of another type).
func getS(item map[string]types.AttributeValue, name string) (string, bool) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

func getN(item map[string]types.AttributeValue, name string) (string, bool) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return "", false
	}
	return v.Value, true
}

// getInt reads a whole number attribute; a decimal part is cut off.
func getInt(item map[string]types.AttributeValue, name string) (int64, bool) {
	s, ok := getN(item, name)
	if !ok {
		return 0, false
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		s = s[:i]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
