package main

import (
	"crypto/sha256"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// A function URL with AWS_IAM auth passes the signer's IAM identity in
// requestContext.authorizer.iam (accessKey, accountId, callerId, userArn, userId); with auth
// NONE there is none. The API scopes what a caller can reach by that identity, its principal:
//
//   - an Idempotency-Key is the caller's own: the job's key is "<principal> <key>", so another
//     caller can neither take a key first (the first caller would get 409) nor, by repeating a
//     guessed body with it, learn the first caller's job id;
//   - a job id carries a tag of the principal that enqueued it ("<ULID>-<tag>"), and GET
//     /jobs/{id} answers 404 to any other principal, before reading the table.
//
// The principal is the role for an assumed-role session (every session of a role is the same
// caller: a retry from another instance of the web tier, with another session name, must find
// its key), else the caller's ARN.

// principal returns the IAM principal that signed req, or "" when the URL takes unsigned
// requests (auth NONE): then every caller shares one key space.
func principal(req events.LambdaFunctionURLRequest) string {
	auth := req.RequestContext.Authorizer
	if auth == nil || auth.IAM == nil {
		return ""
	}
	iam := auth.IAM
	switch {
	case iam.UserARN != "":
		return principalOfARN(iam.UserARN)
	case iam.UserID != "" || iam.CallerID != "":
		// Not seen from Lambda (it sends the ARN), but never unscoped when signed.
		id := iam.UserID
		if id == "" {
			id = iam.CallerID
		}
		if i := strings.IndexByte(id, ':'); i > 0 { // "AROA…:session": the role's unique id
			id = id[:i]
		}
		return "iam:" + iam.AccountID + ":" + id
	}
	return "iam:" + iam.AccountID
}

// principalOfARN drops the session name of an assumed-role ARN
// (arn:aws:sts::123456789012:assumed-role/web/i-0abc → …:assumed-role/web); other ARNs (users,
// the root, federated users) are the principal as they are.
func principalOfARN(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) == 6 && parts[2] == "sts" && strings.HasPrefix(parts[5], "assumed-role/") {
		rest := parts[5][len("assumed-role/"):]
		if i := strings.IndexByte(rest, '/'); i > 0 {
			return strings.Join(parts[:5], ":") + ":assumed-role/" + rest[:i]
		}
	}
	return arn
}

// scopedKey is the job key of a caller's Idempotency-Key: "<principal> <key>", or key itself
// without a principal. A space is in no ARN, so no other principal's key can be the same.
func scopedKey(principal, key string) string {
	if principal == "" {
		return key
	}
	return principal + " " + key
}

// callerTag is the tag of a principal in its job ids: 16 characters of Crockford base32, 80
// bits of its SHA-256.
func callerTag(principal string) string {
	sum := sha256.Sum256([]byte("sqsworker-api-caller/1\x00" + principal))
	const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [16]byte
	bits, n, j := uint(0), 0, 0
	for _, c := range sum[:10] {
		bits = bits<<8 | uint(c)
		n += 8
		for n >= 5 {
			n -= 5
			b[j] = crockford[(bits>>n)&31]
			j++
		}
	}
	return string(b[:])
}

// ownsID reports whether principal may read the job id: any id without a principal, else only
// the ids that carry its tag.
func ownsID(principal, id string) bool {
	return principal == "" || strings.HasSuffix(id, "-"+callerTag(principal))
}
