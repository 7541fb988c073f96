// go-nethttp-hello: the quickstart's Go service. Standard library only.
//
// GET / answers 200 with a short plain-text body. The port comes from $PORT, the bind
// address from $HOST (default 127.0.0.1).
package main

import (
	"log"
	"net/http"
	"os"
)

const body = "Hello, World!"

func main() {
	host := os.Getenv("HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(body))
	})
	addr := host + ":" + port
	log.Printf("go-nethttp-hello listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, mux))
}
