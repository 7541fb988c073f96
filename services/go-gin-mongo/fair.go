package main

// The fair variant: what the study's Go API looks like with the quirks removed, matching the
// shared contract of every fair implementation of study 01.
//
//   - Gin release mode, gin.New() with Recovery only: no per-request log line.
//   - One client, connected at start, whose pool serves every request.
//   - /helloWorld answers {"message":"Hello world!"}; /users/:id answers
//     {"id":1,"name":"Arthur","surname":"Morgan","email":"ArthurMorgan@mail.com"};
//     400 for a non-integer id, 404 for an unknown one, 500 on a database error.

import (
	"context"
	"errors"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

type fairUser struct {
	ID      int    `bson:"_id" json:"id"`
	Name    string `bson:"name" json:"name"`
	Surname string `bson:"surname" json:"surname"`
	Email   string `bson:"email" json:"email"`
}

func fairRouter(uri string) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := mongo.Connect(ctx, options.Client().ApplyURI(uri))
	if err != nil {
		log.Fatalf("mongo.Connect: %v", err)
	}
	if err := client.Ping(ctx, nil); err != nil {
		log.Fatalf("cannot reach MongoDB: %v", err)
	}
	users := client.Database("mongo").Collection("users")

	router := gin.New()
	router.Use(gin.Recovery())
	router.GET("/helloWorld", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{"message": "Hello world!"})
	})
	router.GET("/users/:id", func(c *gin.Context) {
		id, err := strconv.Atoi(c.Param("id"))
		if err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": "id must be an integer"})
			return
		}
		var user fairUser
		err = users.FindOne(c.Request.Context(), bson.D{{Key: "_id", Value: id}}).Decode(&user)
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			c.JSON(http.StatusNotFound, gin.H{"error": "user not found"})
		case err != nil:
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		default:
			c.JSON(http.StatusOK, user)
		}
	})
	return router
}
