package dynamicinformer

import (
	"net/http"
)

// notReadyNoWait wraps a transport so that a watch-list request
// (sendInitialEvents=true) the API server refuses with 429 Too Many
// Requests comes back at once, without its Retry-After. The server answers
// so while its watch cache of the resource is (re)initializing — for a
// custom resource, on the first request after its CRD was created — and
// client-go's REST client would wait the Retry-After (1 s) and send the
// stream again. Returned at once, the informer falls back to a plain list,
// which the server serves meanwhile from etcd. Any other request keeps
// client-go's retry.
func notReadyNoWait(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests && req.URL.Query().Get("sendInitialEvents") == "true" {
			resp.Header.Del("Retry-After")
		}
		return resp, err
	})
}
