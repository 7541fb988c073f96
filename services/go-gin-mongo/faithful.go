package main

// The faithful variant reproduces the behaviour of the study's Go API
// (ArturMarekNowak/DotnetGoRustBenchmark@025a8f9, src/go: app.go, controllers/,
// repositories/usersRepository.go, models/user.go), rewritten here, quirks included:
//
//   - gin.Default(): Logger (one line per request on stdout) and Recovery middleware; GIN_MODE
//     is left unset, so Gin runs in debug mode.
//   - /helloWorld answers {"message":"Hello World!"} (capital W).
//   - /users/:id opens a NEW client (mongo.Connect) for every request, runs FindOne({_id: id})
//     and disconnects; on "no documents" it returns without disconnecting (the client leaks).
//   - The user struct has no tags: the JSON keys are Id, Name, Surname, Email and Id is set by
//     hand from the path parameter.
//   - The handler does not return after writing an error (400 or 404), so the 200 JSON is
//     written after it.

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// faithfulUser mirrors the original models.User: no tags, so BSON reads the lower-cased
// field names and JSON writes the Go names.
type faithfulUser struct {
	Id      int
	Name    string
	Surname string
	Email   string
}

func faithfulRouter(uri string) *gin.Engine {
	// Debug mode unless the environment says otherwise, as in the original (GIN_MODE unset).
	router := gin.Default()
	router.GET("/users/:id", func(c *gin.Context) { faithfulGetUser(c, uri) })
	router.GET("/helloWorld", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{"message": "Hello World!"})
	})
	return router
}

func faithfulGetUser(c *gin.Context, uri string) {
	id, err := strconv.Atoi(c.Param("id"))
	if err != nil {
		c.JSON(http.StatusBadRequest, gin.H{"message": "invalid path parameter"})
		// no return, as in the original
	}
	user, err := faithfulFindUser(uri, id)
	if err != nil {
		c.JSON(http.StatusNotFound, gin.H{"message": "user not found"})
		// no return, as in the original
	}
	c.JSON(http.StatusOK, user)
}

// faithfulFindUser connects, queries and disconnects: one client per call.
func faithfulFindUser(uri string, id int) (*faithfulUser, error) {
	client, err := mongo.Connect(context.TODO(), options.Client().ApplyURI(uri))
	if err != nil {
		panic(err)
	}
	var user faithfulUser
	err = client.Database("mongo").Collection("users").
		FindOne(context.TODO(), bson.D{{Key: "_id", Value: id}}).Decode(&user)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, err // the client is not disconnected here, as in the original
	}
	if err != nil {
		panic(err)
	}
	if err := client.Disconnect(context.TODO()); err != nil {
		panic(err)
	}
	user.Id = id
	return &user, nil
}
