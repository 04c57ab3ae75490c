package dynamicinformer

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestClassify(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gr := gvr.GroupResource()
	storeRead := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Reason:  metav1.StatusReasonStoreReadError,
		Message: "failed to read one or more widgets.example.com from the storage: corrupt object, key: /registry/example.com/widgets/ns/w5",
	}}
	for _, c := range []struct {
		err  error
		want error
	}{
		{apierrors.NewForbidden(gr, "", errors.New("no")), ErrForbidden},
		{apierrors.NewUnauthorized("no"), ErrForbidden},
		{apierrors.NewNotFound(gr, ""), ErrNotServed},
		{apierrors.NewBadRequest("bad selector"), ErrInvalid},
		// The reflector wraps list errors with %w.
		{fmt.Errorf("failed to list widgets: %w", storeRead), ErrStoreRead},
		{apierrors.NewInternalError(errors.New("boom")), ErrWatch},
		{errors.New("connection reset"), ErrWatch},
	} {
		got := classify(gvr, c.err)
		if !errors.Is(got, c.want) {
			t.Errorf("classify(%v) = %v, want kind %v", c.err, got, c.want)
		}
		var se *apierrors.StatusError
		if errors.As(c.err, &se) && !errors.As(got, &se) {
			t.Errorf("classify(%v) lost the *StatusError", c.err)
		}
	}
}

// An InformerError names its resource as kubectl takes it, not in
// schema.GroupVersionResource's Go form: operators read it in statuses.
func TestInformerErrorNamesTheResourceAsKubectl(t *testing.T) {
	for _, c := range []struct {
		gvr  schema.GroupVersionResource
		want string
	}{
		{schema.GroupVersionResource{Group: "never.example.com", Version: "v1", Resource: "later"}, "later.v1.never.example.com: resource not served: gone"},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "configmaps.v1: resource not served: gone"},
	} {
		err := &InformerError{GVR: c.gvr, Kind: ErrNotServed, Err: errors.New("gone")}
		if got := err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
