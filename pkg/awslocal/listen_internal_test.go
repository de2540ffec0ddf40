package awslocal

import (
	"errors"
	"io"
	"net/http"
	"testing"
)

type failingBody struct{ err error }

func (b failingBody) Read([]byte) (int, error) { return 0, b.err }
func (failingBody) Close() error               { return nil }

// TestClosedBodyIsEOF: a read of a request body the server closed (after its Content-Length
// bytes were passed on) ends the body for the transport, where it used to fail the write and cut
// the emulator's answer off (see closedBodyIsEOF); other errors pass unchanged.
func TestClosedBodyIsEOF(t *testing.T) {
	t.Parallel()
	other := errors.New("connection reset")
	for _, tt := range []struct {
		in, want error
	}{
		{http.ErrBodyReadAfterClose, io.EOF},
		{io.EOF, io.EOF},
		{other, other},
	} {
		if _, err := (closedBodyIsEOF{failingBody{tt.in}}).Read(make([]byte, 8)); err != tt.want {
			t.Errorf("Read after %v = %v, want %v", tt.in, err, tt.want)
		}
	}
}
