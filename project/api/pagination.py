"""List pagination shared by every API list: ``?limit=&offset=``, with a total count."""

from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 1000
