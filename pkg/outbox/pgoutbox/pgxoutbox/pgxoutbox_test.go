package pgxoutbox_test

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox/pgxoutbox"
)

// Tx takes transactions only: a connection or a pool would run EnqueueTx's insert in a
// transaction of its own, outside the business write.
func TestTxTakesOnlyTransactions(t *testing.T) {
	param := reflect.TypeOf(pgxoutbox.Tx).In(0)
	for _, tt := range []struct {
		name string
		v    any
		want bool
	}{
		{"pgx.Tx of a connection", (pgx.Tx)(nil), true},
		{"*pgxpool.Tx", (*pgxpool.Tx)(nil), true},
		{"*pgx.Conn", (*pgx.Conn)(nil), false},
		{"*pgxpool.Pool", (*pgxpool.Pool)(nil), false},
		{"*pgxpool.Conn", (*pgxpool.Conn)(nil), false},
	} {
		typ := reflect.TypeOf(tt.v)
		if typ == nil { // pgx.Tx itself: a nil interface value has no dynamic type
			typ = reflect.TypeOf((*pgx.Tx)(nil)).Elem()
		}
		if got := typ.AssignableTo(param); got != tt.want {
			t.Errorf("%s assignable to pgxoutbox.Tx's parameter %s: %v, want %v", tt.name, param, got, tt.want)
		}
	}
}
