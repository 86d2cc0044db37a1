"""What the event feed (GET /api/events/) answers: the events, and the token to resume from."""

from rest_framework import serializers

from project.models import Event


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ["id", "kind", "object_type", "object_id", "message", "data", "created_at"]
        read_only_fields = fields


class EventFeedSerializer(serializers.Serializer):
    token = serializers.IntegerField(help_text="Pass as ?since= to get what comes next.")
    events = EventSerializer(many=True)
    resync = serializers.BooleanField(
        required=False,
        help_text="Present (true) when some events after ``since`` were pruned: what is left "
        "is in ``events``; reload what you show, then go on from ``token``.",
    )
