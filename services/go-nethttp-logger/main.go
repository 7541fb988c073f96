// go-nethttp-logger: the seed's final Go server (ZanePearton/Go-Serve@f059a34, main.go),
// unchanged except for where it listens: the seed bound "127.0.0.1:8080" (and printed 8090);
// this one binds $HOST (default 127.0.0.1) and $PORT (default 8080) and prints the real
// address. Everything else is the seed's: the standard library only, an http.Server with no
// timeouts, a logRequest middleware that times the handler and writes one line per request
// with log.Printf (to stderr), and a handler that writes the body with fmt.Fprint (so
// net/http sniffs the Content-Type).
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	host := os.Getenv("HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	addr := host + ":" + port

	// Create a new ServeMux (router)
	mux := http.NewServeMux()

	// Register a handler function for the root URL
	mux.HandleFunc("/", rootHandler)

	// Create a new HTTP server
	server := &http.Server{
		Addr:    addr,
		Handler: logRequest(mux), // Wrap the handler with the logging middleware
	}

	// Start the server and log if there's an error
	fmt.Println("Server is running on http://" + addr)
	if err := server.ListenAndServe(); err != nil {
		log.Fatal("Error starting server: ", err)
	}
}

// rootHandler responds to requests at the root URL
func rootHandler(w http.ResponseWriter, r *http.Request) {
	fmt.Fprint(w, "Hello, World! This is a cool web test!")
}

// logRequest is a middleware that logs each request
func logRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		duration := time.Since(start)
		log.Printf("Request: %s %s, Duration: %s\n", r.Method, r.URL.Path, duration)
	})
}
