package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// cookiePrefix starts the session cookie's name; the port the console listens on follows
// (sqsworker_console_8080), so that two consoles on one host — a browser sends a host's
// cookies to every one of its ports — keep their own sessions.
const cookiePrefix = "sqsworker_console"

// maxFormBytes bounds a POST body: a job's args are at most producer.MaxMessageSize, and a
// form encodes them.
const maxFormBytes = 4 << 20

// Bounds of the session store: sign-ins beyond them end the oldest sessions first.
const (
	maxSessions = 1000
	maxCodes    = 100
	maxFlashes  = 8
)

// Defaults and bounds of Config.SessionLifetime.
const (
	defaultSessionLifetime = 12 * time.Hour
	minSessionLifetime     = time.Minute
	maxSessionLifetime     = 30 * 24 * time.Hour
)

// maxSignInLinkFor bounds SignInLink's validFor.
const maxSignInLinkFor = 24 * time.Hour

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// randomToken returns 32 random bytes in hex.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storeKey is how the store keys a secret (a session's cookie value, a sign-in code): its
// SHA-256, so that the map's lookups reveal nothing of the secret through timing.
func storeKey(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// session is one sign-in: its cookie value is a random secret (the store keeps its hash), it
// ends at expires or at sign-out, and it has its own CSRF token and the notices its actions
// left for the page they redirect to.
type session struct {
	csrf    string
	created time.Time
	expires time.Time
	flashes []flash
}

// flash is a notice an action leaves for the page its redirect shows (?done=key).
type flash struct{ key, text string }

// sessionStore holds the sessions and the one-time sign-in codes of a console.
type sessionStore struct {
	mu       sync.Mutex
	sessions map[string]*session  // by storeKey(cookie value)
	codes    map[string]time.Time // storeKey(code) → its end
}

// start records a new session that lasts until expires and returns its cookie value.
func (s *sessionStore) start(now, expires time.Time) (string, *session) {
	value := randomToken()
	sess := &session{csrf: randomToken(), created: now, expires: expires}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions == nil {
		s.sessions = map[string]*session{}
	}
	for k, old := range s.sessions {
		if !now.Before(old.expires) {
			delete(s.sessions, k)
		}
	}
	for len(s.sessions) >= maxSessions { // end the oldest
		oldestKey, oldest := "", time.Time{}
		for k, old := range s.sessions {
			if oldestKey == "" || old.created.Before(oldest) {
				oldestKey, oldest = k, old.created
			}
		}
		delete(s.sessions, oldestKey)
	}
	s.sessions[storeKey(value)] = sess
	return value, sess
}

// get returns the live session of a cookie value, or nil.
func (s *sessionStore) get(value string, now time.Time) *session {
	if value == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := storeKey(value)
	sess := s.sessions[k]
	if sess == nil {
		return nil
	}
	if !now.Before(sess.expires) {
		delete(s.sessions, k)
		return nil
	}
	return sess
}

// end ends the session of a cookie value.
func (s *sessionStore) end(value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, storeKey(value))
}

// addFlash leaves a notice in the session and returns its key.
func (s *sessionStore) addFlash(sess *session, code, text string) string {
	key := code + "-" + randomToken()[:12]
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.flashes = append(sess.flashes, flash{key, text})
	if len(sess.flashes) > maxFlashes {
		sess.flashes = sess.flashes[len(sess.flashes)-maxFlashes:]
	}
	return key
}

// takeFlash returns the session's notice of that key, and forgets it.
func (s *sessionStore) takeFlash(sess *session, key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range sess.flashes {
		if f.key == key {
			sess.flashes = append(sess.flashes[:i], sess.flashes[i+1:]...)
			return f.text, true
		}
	}
	return "", false
}

// newCode records a one-time sign-in code valid until end.
func (s *sessionStore) newCode(now, end time.Time) string {
	code := randomToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.codes == nil {
		s.codes = map[string]time.Time{}
	}
	for k, e := range s.codes {
		if !now.Before(e) {
			delete(s.codes, k)
		}
	}
	for len(s.codes) >= maxCodes {
		oldestKey, oldest := "", time.Time{}
		for k, e := range s.codes {
			if oldestKey == "" || e.Before(oldest) {
				oldestKey, oldest = k, e
			}
		}
		delete(s.codes, oldestKey)
	}
	s.codes[storeKey(code)] = end
	return code
}

// useCode reports whether code is a live one-time code, and uses it up.
func (s *sessionStore) useCode(code string, now time.Time) bool {
	if code == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := storeKey(code)
	end, ok := s.codes[k]
	delete(s.codes, k)
	return ok && now.Before(end)
}

// caller is who sent a request: a signed-in browser (its session), a script with the token in
// an "Authorization: Bearer" header, or an anonymous viewer.
type caller struct {
	sess   *session
	bearer bool
}

func (cl caller) signedIn() bool { return cl.sess != nil || cl.bearer }

// csrf is the token the caller's forms carry: its session's, none for a script or a viewer.
func (cl caller) csrf() string {
	if cl.sess == nil {
		return ""
	}
	return cl.sess.csrf
}

// caller returns who sent r.
func (c *Console) caller(r *http.Request) caller {
	if c.cfg.ReadOnly || c.cfg.Token == "" {
		return caller{}
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && equal(tok, c.cfg.Token) {
		return caller{bearer: true}
	}
	ck, err := r.Cookie(c.cookieName(r))
	if err != nil {
		return caller{}
	}
	return caller{sess: c.sessions.get(ck.Value, c.cfg.Now())}
}

// signedIn reports whether r comes from a signed-in browser or carries the token.
func (c *Console) signedIn(r *http.Request) bool { return c.caller(r).signedIn() }

// cookieName is the session cookie's name for r: the prefix and the port of the address the
// request came in on (http.LocalAddrContextKey: the listener's, not the Host header's), else the
// Host header's port.
func (c *Console) cookieName(r *http.Request) string {
	port := ""
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			port = p
		}
	}
	if port == "" {
		if _, p, err := net.SplitHostPort(r.Host); err == nil {
			port = p
		}
	}
	for _, b := range []byte(port) {
		if b < '0' || b > '9' {
			port = ""
			break
		}
	}
	if port == "" {
		return cookiePrefix
	}
	return cookiePrefix + "_" + port
}

// secureCookie reports whether the session cookie is Secure: Config.SecureCookie, or a request
// that came over TLS.
func (c *Console) secureCookie(r *http.Request) bool { return c.cfg.SecureCookie || r.TLS != nil }

// mayReadDLQ reports whether r may have the console peek at the DLQ: the peek is a receive of
// each message, so a console that has sign-ins (a token, not read-only) peeks for signed-in
// requests only. A read-only console peeks for anyone who reaches it.
func (c *Console) mayReadDLQ(r *http.Request) bool {
	return c.cfg.Token == "" || c.cfg.ReadOnly || c.signedIn(r)
}

// crossSite reports whether a browser sent r from another site, or from another origin of the
// same site (another port of 127.0.0.1): Fetch Metadata's Sec-Fetch-Site, else an Origin
// header that is not the console's host. A request without either (a script, an old browser)
// is not cross-site.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	case "same-origin", "none":
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		return err != nil || !strings.EqualFold(u.Host, r.Host)
	}
	return r.Header.Get("Origin") == "null"
}

// startSession starts a session for r's browser and gives it the cookie.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Now()
	value, _ := c.sessions.start(now, now.Add(c.cfg.SessionLifetime))
	http.SetCookie(w, &http.Cookie{
		Name: c.cookieName(r), Value: value, Path: c.path("/"), MaxAge: int(c.cfg.SessionLifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secureCookie(r),
	})
	c.log.Info("console sign-in", "who", c.who(r, true), "remote", r.RemoteAddr)
}

// dropCookie tells the browser to forget the session cookie.
func (c *Console) dropCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: c.cookieName(r), Value: "", Path: c.path("/"), MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secureCookie(r)})
}

// SignInLink returns a one-time sign-in link, the console's path "/signin?code=…" under
// Config.Prefix: the first request for it signs that browser in and uses the code up, and it
// stops working after validFor (at most 24 h) unused. `sqsworker ui` prints one, so that the
// token itself never goes into a URL (a browser keeps every URL it opened in its history). A
// read-only console has no sign-in: it returns an error wrapping ErrConfig.
func (c *Console) SignInLink(validFor time.Duration) (string, error) {
	switch {
	case c.cfg.ReadOnly || c.cfg.Token == "":
		return "", fmt.Errorf("%w: a read-only console has no sign-in", ErrConfig)
	case validFor <= 0 || validFor > maxSignInLinkFor:
		return "", fmt.Errorf("%w: a sign-in link is valid for 0-%v, not %v", ErrConfig, maxSignInLinkFor, validFor)
	}
	now := c.cfg.Now()
	return c.path("/signin") + "?code=" + c.sessions.newCode(now, now.Add(validFor)), nil
}

// refuseTokenInURL wraps a GET handler: a URL with ?token=… (an old sign-in link) signs nobody
// in — the token would stay in the browser's history — and is redirected to the sign-in form,
// without the token.
func (c *Console) refuseTokenInURL(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("token") {
			h(w, r)
			return
		}
		q.Del("token")
		target := r.URL.Path
		if len(q) > 0 {
			target += "?" + q.Encode()
		}
		if c.cfg.ReadOnly || c.cfg.Token == "" {
			http.Redirect(w, r, safeNext(c, target), http.StatusSeeOther)
			return
		}
		c.log.Warn("console sign-in refused", "remote", r.RemoteAddr, "why", "token in the URL")
		http.Redirect(w, r, c.link("/signin", url.Values{"failed": {"url"}, "next": {safeNext(c, target)}}), http.StatusSeeOther)
	}
}

// signInFailures are what the sign-in page says for ?failed=…: a fixed set.
var signInFailures = map[string]string{
	"token": "That is not the console's token.",
	"url": "The console does not take its token in a link (a browser keeps every URL it opened in its history): " +
		"paste the token here, or open the one-time link `sqsworker ui` printed.",
	"code": "That sign-in link was used already, or has expired: each link signs one browser in, once. " +
		"Sign in with the token `sqsworker ui` printed (or its --token).",
}

// signInPage shows the form that takes the token; with ?code=… (a one-time link) it signs the
// browser in.
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	next := safeNext(c, q.Get("next"))
	failed := q.Get("failed")
	if q.Has("code") && r.Method == http.MethodGet { // a HEAD (a link checker) uses up nothing
		if !c.cfg.ReadOnly && c.cfg.Token != "" && c.sessions.useCode(q.Get("code"), c.cfg.Now()) {
			c.startSession(w, r)
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		c.log.Warn("console sign-in refused", "remote", r.RemoteAddr, "why", "used or unknown sign-in code")
		failed = "code"
	}
	v := c.newView(r, "signin", "Sign in")
	v.Error = signInFailures[failed]
	v.Data = struct{ Next string }{next}
	code := http.StatusOK
	if failed == "code" {
		code = http.StatusUnauthorized
	}
	c.render(w, r, code, v)
}

// safeNext returns next when it is a path of the console, else the overview: a sign-in never
// redirects elsewhere. next is a request URI (percent-encoded ASCII): a control character, a
// space, a backslash or a byte beyond ASCII is refused — a browser drops a tab or a newline from
// a URL, so that "/\t/evil.example" would become "//evil.example", another host.
func safeNext(c *Console, next string) string {
	home := c.path("/")
	if next == "" || !strings.HasPrefix(next, home) || strings.HasPrefix(next, "//") {
		return home
	}
	for i := 0; i < len(next); i++ {
		if b := next[i]; b <= ' ' || b >= 0x7f || b == '\\' {
			return home
		}
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return home
	}
	return next
}

// signIn takes the token from the sign-in form.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := c.cop.Check(r); err != nil {
		c.refuse(w, r, http.StatusForbidden, "Cross-origin requests are refused.")
		return
	}
	next := safeNext(c, r.PostFormValue("next"))
	if c.cfg.ReadOnly {
		c.refuse(w, r, http.StatusForbidden, "The console is read-only: there is nothing to sign in for.")
		return
	}
	if c.cfg.Token == "" || !equal(r.PostFormValue("token"), c.cfg.Token) {
		c.log.Warn("console sign-in refused", "remote", r.RemoteAddr, "why", "wrong token")
		http.Redirect(w, r, c.link("/signin", url.Values{"failed": {"token"}, "next": {next}}), http.StatusSeeOther)
		return
	}
	c.startSession(w, r)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut ends the session (at once, on the server: a copy of the cookie no longer works) and
// drops the cookie. Its form carries the session's CSRF token, as every POST's.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := c.cop.Check(r); err != nil {
		c.refuse(w, r, http.StatusForbidden, "Cross-origin requests are refused.")
		return
	}
	if ck, err := r.Cookie(c.cookieName(r)); err == nil {
		if sess := c.sessions.get(ck.Value, c.cfg.Now()); sess != nil {
			if !equal(r.PostFormValue("csrf"), sess.csrf) {
				c.refuse(w, r, http.StatusForbidden, "The form's CSRF token is missing or wrong: reload the page and try again.")
				return
			}
			c.sessions.end(ck.Value)
			c.log.Info("console sign-out", "who", c.who(r, true), "remote", r.RemoteAddr)
		}
	}
	c.dropCookie(w, r)
	http.Redirect(w, r, c.link("/", url.Values{"done": {"signed-out"}}), http.StatusSeeOther)
}

// who names the requester for the action log: Config.Identity, else "token" (signed in) or
// "anonymous".
func (c *Console) who(r *http.Request, signedIn bool) string {
	if c.cfg.Identity != nil {
		if id := c.cfg.Identity(r); id != "" {
			return id
		}
	}
	if signedIn {
		return "token"
	}
	return "anonymous"
}

// actionLog collects what one action did, for its one log line.
type actionLog struct {
	attrs   []any
	err     error
	refused string
}

// add records attributes (key, value pairs) of the action: the job, the schedule, counts.
func (a *actionLog) add(kv ...any) { a.attrs = append(a.attrs, kv...) }

// fail records the action's error.
func (a *actionLog) fail(err error) { a.err = err }

// actionFunc is an action's handler; the wrapper has checked the request.
type actionFunc func(w http.ResponseWriter, r *http.Request, al *actionLog)

// action wraps a POST handler with the checks every action passes, in order: not read-only, not
// cross-origin (Sec-Fetch-Site / Origin), the token (a session, or a bearer header), and, for a
// browser's form, the session's CSRF token. It writes one log line per request, refused or not.
func (c *Console) action(name string, h actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		al := &actionLog{}
		cl := c.caller(r)
		defer func() { c.logAction(r, name, cl.signedIn(), al) }()
		switch {
		case c.cfg.ReadOnly:
			al.refused = "read-only"
			c.refuse(w, r, http.StatusForbidden, "The console is read-only: actions are turned off (started with --read-only).")
			return
		case c.cop.Check(r) != nil:
			al.refused = "cross-origin"
			c.refuse(w, r, http.StatusForbidden, "Cross-origin requests are refused.")
			return
		case !cl.signedIn():
			al.refused = "no token"
			c.refuse(w, r, http.StatusUnauthorized, "This action needs the console's token: sign in with the token `sqsworker ui` printed (or its --token).")
			return
		}
		if err := r.ParseForm(); err != nil {
			al.refused = "bad form"
			c.refuse(w, r, http.StatusBadRequest, "The form could not be read: "+clean(err.Error()))
			return
		}
		if !cl.bearer && !equal(r.PostFormValue("csrf"), cl.csrf()) {
			al.refused = "csrf"
			c.refuse(w, r, http.StatusForbidden, "The form's CSRF token is missing or wrong: reload the page and try again.")
			return
		}
		h(w, r, al)
	}
}

// logAction writes the action's one line.
func (c *Console) logAction(r *http.Request, name string, signedIn bool, al *actionLog) {
	args := []any{"action", name, "who", c.who(r, signedIn), "remote", r.RemoteAddr}
	args = append(args, al.attrs...)
	switch {
	case al.refused != "":
		c.log.Warn("console action refused", append(args, "why", al.refused)...)
	case al.err != nil:
		c.log.Error("console action failed", append(args, "error", al.err.Error())...)
	default:
		c.log.Info("console action", args...)
	}
}

// refuse renders an error page with the status code.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	v := c.newView(r, "error", http.StatusText(code))
	v.Error = msg
	v.Data = struct{ Code int }{code}
	c.render(w, r, code, v)
}

// done answers a successful action with a redirect to page p of the console whose notice says
// text: the notice is kept in the caller's session, and the redirect names it (?done=key), so
// that a link cannot make the console say anything (a script with a bearer token gets the
// redirect without a notice).
func (c *Console) done(w http.ResponseWriter, r *http.Request, p string, q url.Values, code, text string) {
	if q == nil {
		q = url.Values{}
	}
	if cl := c.caller(r); cl.sess != nil {
		q.Set("done", c.sessions.addFlash(cl.sess, code, text))
	}
	c.redirect(w, r, p, q)
}

// staticNotices are the notices a link may ask for by name (?done=name): fixed sentences with
// nothing from the request in them.
var staticNotices = map[string]string{
	"signed-out": "Signed out.",
}

// notice returns the notice ?done= asks for: a static one, or one the caller's session keeps
// (and then forgets).
func (c *Console) notice(r *http.Request, cl caller) string {
	key := r.URL.Query().Get("done")
	if key == "" {
		return ""
	}
	if text, ok := staticNotices[key]; ok {
		return text
	}
	if cl.sess == nil {
		return ""
	}
	text, _ := c.sessions.takeFlash(cl.sess, key)
	return text
}
