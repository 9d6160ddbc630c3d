"""A database-backed REST API under closed-loop virtual users (the Node.js vs Java/Tomcat
study): an inventory of seven resources in SQLite, plain SQL or an ORM, served by the agent's
own server or by hypercorn + Starlette."""
