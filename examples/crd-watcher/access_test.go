package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/dynamicinformer"
)

var crontabsGVR = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}

// reviewServer is a fake API server's authorization API for the access
// check: a SelfSubjectRulesReview of a namespace in allowed lists list
// and watch on every resource, of any other namespace nothing (complete
// answers); a SelfSubjectReview names user. It records the reviews
// asked, as "kind namespace".
type reviewServer struct {
	allowed map[string]bool
	user    string

	mu    sync.Mutex
	asked []string
}

func (s *reviewServer) client() *dynamicfake.FakeDynamicClient {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crontabsGVR: "CronTabList"})
	client.PrependReactor("create", "selfsubjectrulesreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		ns, _, _ := unstructured.NestedString(review.Object, "spec", "namespace")
		s.record("SelfSubjectRulesReview " + ns)
		rules := []any{}
		if s.allowed[ns] {
			rules = append(rules, map[string]any{"verbs": []any{"list", "watch"}, "apiGroups": []any{"*"}, "resources": []any{"*"}})
		}
		_ = unstructured.SetNestedField(review.Object, false, "status", "incomplete")
		_ = unstructured.SetNestedSlice(review.Object, rules, "status", "resourceRules")
		return true, review, nil
	})
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		ns, _, _ := unstructured.NestedString(review.Object, "spec", "resourceAttributes", "namespace")
		s.record("SelfSubjectAccessReview " + ns)
		_ = unstructured.SetNestedField(review.Object, s.allowed[ns], "status", "allowed")
		return true, review, nil
	})
	client.PrependReactor("create", "selfsubjectreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		_ = unstructured.SetNestedField(review.Object, s.user, "status", "userInfo", "username")
		return true, review, nil
	})
	return client
}

func (s *reviewServer) record(review string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, review)
}

func (s *reviewServer) reviews() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// syncedWithAccessCheck runs one crontabs informer over namespaces (none:
// all) with the access check against s, and returns its first Synced
// status.
func syncedWithAccessCheck(t *testing.T, s *reviewServer, namespaces ...string) dynamicinformer.Status {
	t.Helper()
	f := dynamicinformer.NewSharedInformerFactory(s.client(), dynamicinformer.Options{
		Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithAccessCheck(true)}, DisableCRDTracking: true})
	defer f.Shutdown()
	statuses := make(chan dynamicinformer.Status, 64)
	defer f.OnStatusChange(func(st dynamicinformer.Status) {
		select {
		case statuses <- st:
		default: // a later one follows
		}
	})()
	var opts []dynamicinformer.ResourceOption
	if len(namespaces) > 0 {
		opts = append(opts, dynamicinformer.WithNamespaces(namespaces...))
	}
	h := f.ForResource(crontabsGVR, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	for {
		if st := h.Status(); st.State == dynamicinformer.Synced {
			return st
		}
		select {
		case <-statuses:
		case <-ctx.Done():
			t.Fatalf("not Synced: %+v", h.Status())
		}
	}
}

// --help and the README say which reviews the access check sends, as the
// library sends them: for all namespaces, too, a SelfSubjectRulesReview
// (of a namespace no RoleBinding can be in), no SelfSubjectAccessReview
// while the rules review answers.
func TestAccessCheckHelpNamesTheReviewsSent(t *testing.T) {
	s := &reviewServer{allowed: map[string]bool{"informerkit:all-namespaces": true}, user: "alice"}
	syncedWithAccessCheck(t, s)
	asked := s.reviews()
	if len(asked) == 0 || !strings.HasPrefix(asked[0], "SelfSubjectRulesReview ") || strings.Contains(strings.Join(asked, ","), "SelfSubjectAccessReview") {
		t.Fatalf("reviews sent for all namespaces: %q, want a SelfSubjectRulesReview and no SelfSubjectAccessReview", asked)
	}

	var help bytes.Buffer
	if _, err := parseArgs([]string{"--help"}, &help); err != nil {
		t.Fatal(err)
	}
	flagHelp := help.String()[strings.Index(help.String(), "--access-check"):]
	flagHelp = flagHelp[:strings.Index(flagHelp, "\n")]
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var readmeRow string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "| `--access-check`") {
			readmeRow = l
		}
	}
	for _, c := range []struct{ where, text, want string }{
		{"--help", flagHelp, "a SelfSubjectRulesReview per namespace and one for all namespaces"},
		{"--help", flagHelp, "SelfSubjectAccessReviews where a rules review cannot answer"},
		{"README", readmeRow, "one SelfSubjectRulesReview per namespace answers for every resource, and one more answers for all namespaces"},
		{"README", readmeRow, "where rules reviews cannot answer, SelfSubjectAccessReviews do"},
	} {
		if !strings.Contains(c.text, c.want) {
			t.Errorf("%s on --access-check lacks %q:\n%s", c.where, c.want, c.text)
		}
	}
	for _, wrong := range []string{"SelfSubjectAccessReview for all namespaces", "SelfSubjectAccessReviews for all namespaces"} {
		if strings.Contains(flagHelp, wrong) || strings.Contains(readmeRow, wrong) {
			t.Errorf("--help or README says %q; the library sends a SelfSubjectRulesReview for all namespaces", wrong)
		}
	}
}

// A several-namespace informer with two of its three namespaces denied by
// the access check: the STATUS line, the JSON record, the status table
// and /readyz give each denied namespace's reason once (the library's
// Err says the first one twice: "namespaces [team-a team-c]: R(team-a):
// R(team-a)").
func TestSeveralNamespacesDenialSaidOnce(t *testing.T) {
	s := &reviewServer{allowed: map[string]bool{"team-b": true}, user: "bob"}
	st := syncedWithAccessCheck(t, s, "team-a", "team-b", "team-c")
	reason := func(ns string) string {
		return `access check (SelfSubjectRulesReview): user "bob" may not list, watch crontabs.stable.example.com in namespace ` + ns
	}
	if len(st.Denied) != 2 || st.Denied["team-a"] != reason("team-a") || st.Denied["team-c"] != reason("team-c") {
		t.Fatalf("Denied = %q, want team-a and team-c denied by the access check", st.Denied)
	}
	denied := "denied in namespace team-a: " + reason("team-a") + "; team-c: " + reason("team-c")
	if st.NextAccessCheck.IsZero() {
		t.Fatal("no NextAccessCheck with namespaces denied")
	}
	// The line ends with when the denied namespaces are checked again.
	next := "; next access check at " + st.NextAccessCheck.Local().Format("15:04:05")

	syncing := st
	syncing.State, syncing.Reason = dynamicinformer.Syncing, "listing"
	stale := st
	stale.State, stale.Reason = dynamicinformer.Stale, "no contact with the API server"
	for _, c := range []struct {
		st   dynamicinformer.Status
		text string
	}{
		{st, "crontabs.v1.stable.example.com Syncing → Synced (0 objects): " + denied + next},
		{syncing, "crontabs.v1.stable.example.com Syncing (0 objects): listing: " + denied + next},
		{stale, "crontabs.v1.stable.example.com Syncing → Stale (0 objects): no contact with the API server: " + denied + next},
	} {
		var text, js, table bytes.Buffer
		newPrinter(&text, &text, false, false).status(c.st, dynamicinformer.Syncing)
		newPrinter(&js, &js, true, false).status(c.st, "")
		newPrinter(&table, &table, false, false).statusTable("final status", "", "", []dynamicinformer.Status{c.st}, nil)
		_, waiting := ready([]dynamicinformer.Status{c.st}, nil)
		outputs := map[string]string{"STATUS line": text.String(), "JSON": js.String(), "status table": table.String(), "/readyz": strings.Join(waiting, "\n")}
		if !strings.HasSuffix(strings.TrimSpace(text.String()), c.text) {
			t.Errorf("%s: STATUS line\n%s\nwant it to end in\n%s", c.st.State, text.String(), c.text)
		}
		for where, out := range outputs {
			for _, ns := range []string{"team-a", "team-c"} {
				r := reason(ns)
				if where == "JSON" {
					b, _ := json.Marshal(r)
					r = strings.Trim(string(b), `"`)
				}
				if n := strings.Count(out, r); n != 1 {
					t.Errorf("%s, %s: the reason of %s %d times, want once:\n%s", c.st.State, where, ns, n, out)
				}
			}
		}
	}
}
