package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// PayloadHash returns the hash of a job's kind and canonical args (hex SHA-256 of the kind, a
// zero byte, and the args re-encoded with sorted keys and no insignificant whitespace), so the
// same job sent by different producers hashes the same. An idempotency store compares it to tell
// a duplicate from a different job reusing a key.
func PayloadHash(kind string, args []byte) (string, error) {
	canon, err := canonicalJSON(args)
	if err != nil {
		return "", fmt.Errorf("payload hash: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// canonicalJSON re-encodes JSON with object keys sorted and numbers kept as written.
func canonicalJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
