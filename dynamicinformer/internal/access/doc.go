// Package access asks the API server, before an informer's first list,
// whether the client's user may list and watch the informer's resource in
// each of its namespaces (a SelfSubjectAccessReview per verb and
// namespace), and holds the informer until it may.
//
// A denial is reported (Hooks.Denied, a *DeniedError naming the missing
// verbs and namespaces) and re-checked on a back-off; no list or watch is
// sent meanwhile. A review that cannot be made (no contact, a server
// without the authorization API, a user who may not create reviews) does
// not hold the informer: Wait reports it (Hooks.Unavailable) and returns,
// so the informer lists as it would without the check and the server's
// answer to the list decides.
//
// The package starts no goroutine: Wait runs on its caller's (the
// reflector's) and returns when its context ends.
package access
