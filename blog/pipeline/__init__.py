"""The writer's pipeline, a call to the file: a Logger (or an event function) finds its call
site's EventSource in the Registry, its SessionWriter pushes the event into its Channel
(back-pressure when full), the Session's Consumer drains the channels through an Output
into OutputStreams. Each module imports only those before it in that order. Internal: the
public names are ``blog``'s."""
