// Package access asks the API server, before an informer's first list,
// whether the client's user may list and watch the informer's resource in
// each of its namespaces, and holds the informer until it may.
//
// The informers of a factory share one Reviewer, which asks each question
// once for all of them (an answer in flight or at most MaxAge old is
// shared): a namespace is answered for every resource in it by one
// SelfSubjectRulesReview, unless that is incomplete (an authorizer that
// cannot list its rules, such as a webhook), when a
// SelfSubjectAccessReview per verb answers. All namespaces are answered
// alike, by one rules review of ClusterScope, a name no namespace can
// have, which lists the cluster-wide grants only; where that is
// incomplete, by SelfSubjectAccessReviews, the first of each verb for
// every group and resource at once ("*", which answers yes for an
// admin), then per resource. A client from NewClient makes the reviews with a request
// budget of its own, so they neither queue behind the informers' lists
// nor spend their budget.
//
// A denial is reported (Hooks.Denied, a *DeniedError naming the missing
// verbs and namespaces) and re-checked on a back-off, from answers newer
// than the denial; no list or watch is sent meanwhile. A review that
// cannot be made (no contact, a server without the authorization API, a
// user who may not create reviews) does not hold the informer: Wait
// reports it (Hooks.Unavailable) and returns, so the informer lists as it
// would without the check and the server's answer to the list decides.
//
// The package starts no goroutine: reviews run on the goroutine of the
// check that asks them (the reflector's), which returns when its context
// ends.
package access
