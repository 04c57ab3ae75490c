package dynamicinformer

import (
	"bytes"
	"io"
	"net/http"
)

// cacheNotReadyMessage is what the API server's watch cache answers (in a
// Status, with 429 and Retry-After) while it is (re)initializing:
// k8s.io/apiserver/pkg/storage/cacher's "storage is (re)initializing".
var cacheNotReadyMessage = []byte("storage is (re)initializing")

// maxNotReadyBody bounds how much of a 429's body is read to tell a watch
// cache that is not ready from throttling. A Status is a few hundred bytes.
const maxNotReadyBody = 4 << 10

// notReadyNoWait wraps a transport so that a watch-list request
// (sendInitialEvents=true) the API server refuses with 429 Too Many
// Requests because its watch cache of the resource is (re)initializing
// comes back at once, without its Retry-After. The server answers so for a
// custom resource on the first request after its CRD was created, and
// client-go's REST client would wait the Retry-After (1 s) and send the
// stream again. Returned at once, the informer falls back to a plain list,
// which the server serves meanwhile from etcd.
//
// Any other 429 keeps its Retry-After and client-go's retry: throttling by
// API Priority and Fairness or max-in-flight (a text/plain "Too many
// requests" with no Status) must slow the client down, not send it to a
// list that costs the server more. Only the first maxNotReadyBody bytes of
// a 429's body are read to tell the two apart; the body is given back
// whole.
func notReadyNoWait(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || req.URL.Query().Get("sendInitialEvents") != "true" {
			return resp, err
		}
		head, rerr := io.ReadAll(io.LimitReader(resp.Body, maxNotReadyBody))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		if rerr == nil && bytes.Contains(head, cacheNotReadyMessage) {
			resp.Header.Del("Retry-After")
		}
		return resp, nil
	})
}
