package dynamooutbox

import (
	"strings"
	"testing"
)

// The emulator substitutes placeholders by plain text replacement: none may be a prefix of
// another, or "#at" would rewrite "#attrs".
func TestPlaceholdersArePrefixFree(t *testing.T) {
	var all []string
	for p := range names {
		all = append(all, p)
	}
	all = append(all, ":pending", ":ver", ":now", ":one", ":owner", ":until", ":zero", ":att", ":sent", ":exp", ":dead", ":err", ":dgpk", ":av", ":pgpk", ":gpk", ":tok", ":pk", ":id", ":ntype")
	for _, a := range all {
		for _, b := range all {
			if a != b && strings.HasPrefix(b, a) {
				t.Errorf("placeholder %s is a prefix of %s", a, b)
			}
		}
	}
}
