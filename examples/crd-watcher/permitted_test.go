package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// The namespaces of a --permitted-namespaces informer: permitted ones
// named, the others grouped by their missing verbs (the access check's
// words) or the server's refusal, at most 5 named per reason.
func TestScopeText(t *testing.T) {
	deny := func(ns, verbs string) string {
		return `access check (SelfSubjectRulesReview): user "alice" may not ` + verbs + ` configmaps in namespace ` + ns
	}
	st := dynamicinformer.Status{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, State: dynamicinformer.Synced,
		Permitted: []string{"a", "b"},
		NotPermitted: map[string]string{
			"c": deny("c", "list, watch"), "d": deny("d", "list, watch"), "e": deny("e", "list, watch"), "f": deny("f", "list, watch"),
			"g": deny("g", "list, watch"), "h": deny("h", "list, watch"), "w": deny("w", "watch"),
			"x": `configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "x"`,
		}}
	want := `permitted in 2 namespaces (a, b); not permitted in 8: configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "x" in x; ` +
		`may not list, watch in c, d, e, f, g and 1 more; may not watch in w`
	if got := scopeText(st); got != want {
		t.Errorf("scopeText =\n%s\nwant\n%s", got, want)
	}
	if got := notPermitted([]dynamicinformer.Status{st, {State: dynamicinformer.Synced}}); len(got) != 1 || got[0] != "configmaps.v1 not permitted in 8 namespaces: "+notPermittedText(st.NotPermitted) {
		t.Errorf("notPermitted = %q", got)
	}
	for _, c := range []struct {
		permitted []string
		want      string
	}{
		{[]string{""}, "permitted in all namespaces"},
		{[]string{}, "permitted in no namespace"},
		{nil, ""},
	} {
		if got := scopeText(dynamicinformer.Status{Permitted: c.permitted}); got != c.want {
			t.Errorf("Permitted %q: %q, want %q", c.permitted, got, c.want)
		}
	}
	// A change of the permitted namespaces is printed while Synced.
	var printed []string
	tr := newTransitions(0, func(dynamicinformer.Status) bool { return true }, func(st dynamicinformer.Status, _ dynamicinformer.State) {
		printed = append(printed, scopeText(st))
	})
	one := dynamicinformer.Status{State: dynamicinformer.Synced, Permitted: []string{"a"}}
	two := dynamicinformer.Status{State: dynamicinformer.Synced, Permitted: []string{"a", "b"}}
	tr.observe(one)
	tr.observe(one)
	tr.observe(two)
	if !slices.Equal(printed, []string{"permitted in 1 namespace (a)", "permitted in 2 namespaces (a, b)"}) {
		t.Errorf("printed %q, want each scope once", printed)
	}
}

// --permitted-namespaces without -n for a user who may not list
// namespaces: the STATUS detail says to name candidates with -n, beside
// the server's 403.
func TestNoNamespacesSaysToNameCandidates(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", errors.New(`User "bob" cannot list resource "namespaces"`))
	st := dynamicinformer.Status{State: dynamicinformer.Failed, Reason: "forbidden",
		Err: &dynamicinformer.InformerError{Kind: dynamicinformer.ErrForbidden, Err: fmt.Errorf("%w: %w", dynamicinformer.ErrNoNamespaces, forbidden)}}
	got := statusDetail(st)
	if !strings.Contains(got, "name the candidate namespaces with -n") || !strings.Contains(got, `cannot list resource "namespaces"`) {
		t.Errorf("detail %q: want the -n hint and the server's message", got)
	}
}

// The STATUS line of an informer whose access is checked says when the
// next check runs (text and JSON); others say nothing of it.
func TestStatusSaysNextAccessCheck(t *testing.T) {
	next := time.Date(2026, 12, 8, 10, 0, 30, 0, time.Local)
	cases := []struct {
		name string
		st   dynamicinformer.Status
		want bool
	}{
		{"permitted", dynamicinformer.Status{State: dynamicinformer.Synced, Permitted: []string{"a"}, NextAccessCheck: next}, true},
		{"denied", dynamicinformer.Status{State: dynamicinformer.Synced, Denied: map[string]string{"b": "forbidden"}, NextAccessCheck: next}, true},
		{"plain", dynamicinformer.Status{State: dynamicinformer.Synced, NextAccessCheck: next}, false},
		{"no check due", dynamicinformer.Status{State: dynamicinformer.Synced, Permitted: []string{"a"}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, json := range []bool{false, true} {
				var out, errOut bytes.Buffer
				p := newPrinter(&out, &errOut, json, false)
				p.now = func() time.Time { return next.Add(-10 * time.Second) }
				p.statusLine("", tc.st, "", false)
				text := errOut.String()
				want := "; next access check at 10:00:30"
				if json {
					text, want = out.String(), `"nextAccessCheck":"`+next.UTC().Format(time.RFC3339)+`"`
				}
				if strings.Contains(text, want) != tc.want {
					t.Errorf("json %v: %q; want %q in it: %v", json, text, want, tc.want)
				}
			}
		})
	}
}
