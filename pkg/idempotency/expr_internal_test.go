package idempotency

import (
	"strings"
	"testing"
)

// TestPlaceholdersBeginNoOther: the attribute names of the cursor begin one another (ckpt,
// ckpt_at, ...); their placeholders must not (the embedded emulator substitutes placeholders as
// text: #ckpt inside #ckpt_at).
func TestPlaceholdersBeginNoOther(t *testing.T) {
	t.Parallel()
	names := []string{AttrPK, AttrState, AttrToken, AttrRuns, AttrLease, AttrUpdated, AttrExpires, AttrGSI1PK, AttrGSI1SK,
		AttrCursor, AttrCursorPointer, AttrCursorSeq, AttrCursorAt, AttrCursorBytes, AttrProgress, AttrProgressMsg, AttrProgressAt,
		AttrCancelAt, AttrCancelWhy, AttrContinuations, AttrRunTime, AttrRunAt, AttrFirstAt, AttrLastAt, AttrReason, AttrResult}
	e := newExpr()
	var ps []string
	for _, n := range names {
		if n != strings.ToLower(n) {
			t.Errorf("attribute %q is not lower case: its placeholder's X would not end it", n)
		}
		ps = append(ps, e.n(n))
	}
	for _, a := range ps {
		for _, b := range ps {
			if a != b && strings.HasPrefix(b, a) {
				t.Errorf("placeholder %s begins %s", a, b)
			}
		}
	}
}
