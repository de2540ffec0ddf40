package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"

	"net/http"
	"net/url"
	"strings"
)

// cookieName is the session cookie: an HMAC of the token, so the token itself never sits in
// the browser.
const cookieName = "sqsworker_console"

// maxFormBytes bounds a POST body: a job's args are at most producer.MaxMessageSize, and a
// form encodes them.
const maxFormBytes = 4 << 20

// mac returns HMAC-SHA256(token, purpose) in hex: the session cookie's value and the CSRF token
// derive from the token this way.
func mac(token, purpose string) string {
	h := hmac.New(sha256.New, []byte(token))
	h.Write([]byte("sqsworker console " + purpose))
	return hex.EncodeToString(h.Sum(nil))
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// bearer reports whether r carries the token in an "Authorization: Bearer" header (scripts and
// tests; a browser never sends it across sites without CORS, which the console does not allow).
func (c *Console) bearer(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	return ok && c.cfg.Token != "" && equal(tok, c.cfg.Token)
}

// signedIn reports whether r presents the token: the session cookie, or a bearer header.
func (c *Console) signedIn(r *http.Request) bool {
	if c.cfg.Token == "" {
		return false
	}
	if c.bearer(r) {
		return true
	}
	ck, err := r.Cookie(cookieName)
	return err == nil && equal(ck.Value, c.cookieValue)
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

// setSession gives the browser the session cookie.
func (c *Console) setSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: c.cookieValue, Path: c.path("/"),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secureCookie(r),
	})
}

// signInFromURL wraps a GET handler: a request with ?token=TOKEN (the link `sqsworker ui`
// prints) signs the browser in and is redirected to the same page without the token, so that
// it stays out of the history and of logs.
func (c *Console) signInFromURL(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("token") {
			h(w, r)
			return
		}
		tok := q.Get("token")
		q.Del("token")
		target := r.URL.Path
		if len(q) > 0 {
			target += "?" + q.Encode()
		}
		if c.cfg.ReadOnly || c.cfg.Token == "" || !equal(tok, c.cfg.Token) {
			c.log.Warn("console sign-in refused", "remote", r.RemoteAddr, "why", "wrong token in the URL")
			http.Redirect(w, r, c.path("/signin")+"?failed=1&next="+url.QueryEscape(target), http.StatusSeeOther)
			return
		}
		c.setSession(w, r)
		c.log.Info("console sign-in", "who", c.who(r, true), "remote", r.RemoteAddr)
		http.Redirect(w, r, target, http.StatusSeeOther)
	}
}

// signInPage shows the form that takes the token.
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(r, "signin", "Sign in")
	if r.URL.Query().Get("failed") != "" {
		v.Error = "That is not the console's token."
	}
	v.Data = struct{ Next string }{safeNext(c, r.URL.Query().Get("next"))}
	c.render(w, r, http.StatusOK, v)
}

// safeNext returns next when it is a path of the console, else the overview: a sign-in never
// redirects elsewhere.
func safeNext(c *Console, next string) string {
	if next == "" || !strings.HasPrefix(next, c.path("/")) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return c.path("/")
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
		http.Redirect(w, r, c.path("/signin")+"?failed=1&next="+url.QueryEscape(next), http.StatusSeeOther)
		return
	}
	c.setSession(w, r)
	c.log.Info("console sign-in", "who", c.who(r, true), "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut drops the session cookie.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if err := c.cop.Check(r); err != nil {
		c.refuse(w, r, http.StatusForbidden, "Cross-origin requests are refused.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: c.path("/"), MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secureCookie(r)})
	http.Redirect(w, r, c.path("/"), http.StatusSeeOther)
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
// cross-origin (Sec-Fetch-Site / Origin), the token (session cookie or bearer header), and, for
// a browser's form, the CSRF token. It writes one log line per request, refused or not.
func (c *Console) action(name string, h actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		al := &actionLog{}
		signed := c.signedIn(r)
		defer func() { c.logAction(r, name, signed, al) }()
		switch {
		case c.cfg.ReadOnly:
			al.refused = "read-only"
			c.refuse(w, r, http.StatusForbidden, "The console is read-only: actions are turned off (started with --read-only).")
			return
		case c.cop.Check(r) != nil:
			al.refused = "cross-origin"
			c.refuse(w, r, http.StatusForbidden, "Cross-origin requests are refused.")
			return
		case !signed:
			al.refused = "no token"
			c.refuse(w, r, http.StatusUnauthorized, "This action needs the console's token: sign in with the token `sqsworker ui` printed (or its --token).")
			return
		}
		if err := r.ParseForm(); err != nil {
			al.refused = "bad form"
			c.refuse(w, r, http.StatusBadRequest, "The form could not be read: "+err.Error())
			return
		}
		if !c.bearer(r) && !equal(r.PostFormValue("csrf"), c.csrf) {
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
